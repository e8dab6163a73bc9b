#include "operator/trainingjob/gang_release.h"

#include "operator/trainingjob/job_conditions.h"

namespace gaptrain {
namespace trainingjob {
namespace {

using Clock = std::chrono::system_clock;

std::optional<Clock::time_point> TimeAt(const nlohmann::json& object, const char* key) {
  if (!object.is_object() || !object.contains(key) || !object[key].is_string()) {
    return std::nullopt;
  }
  return ParseTime(object[key].get<std::string>());
}

}  // namespace

GangStatus GangStatus::FromJson(const nlohmann::json& status_gang) {
  GangStatus s;
  s.waiting_since = TimeAt(status_gang, "waitingSince");
  s.released_at = TimeAt(status_gang, "releasedAt");
  if (status_gang.is_object() && status_gang.contains("releases") &&
      status_gang["releases"].is_number_unsigned()) {
    s.releases = status_gang["releases"].get<uint32_t>();
  }
  return s;
}

nlohmann::json GangStatus::ToJson() const {
  nlohmann::json j = nlohmann::json::object();
  if (waiting_since) j["waitingSince"] = FormatTime(*waiting_since);
  if (released_at) j["releasedAt"] = FormatTime(*released_at);
  if (releases > 0) j["releases"] = releases;
  return j;
}

double JitterOf(const std::string& uid) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : uid) h = (h ^ c) * 1099511628211ull;
  return static_cast<double>(h % 1000) / 1000.0;
}

GangDecision DecideGangRelease(uint64_t timeout_seconds, Clock::time_point now, bool waiting,
                               bool holding, double jitter, const GangStatus& old) {
  GangDecision d;
  d.status = old;
  const std::chrono::seconds timeout(timeout_seconds);
  d.backoff = std::chrono::seconds(
      static_cast<int64_t>(static_cast<double>(timeout_seconds) * (1 + jitter / 2)));
  if (timeout_seconds == 0 || !waiting) {
    d.status.waiting_since.reset();
    return d;
  }
  if (old.released_at && now < *old.released_at + d.backoff) {
    d.hold_trainers = true;  // the pool is the other jobs' for a while
    d.wake_after = *old.released_at + d.backoff - now;
    return d;
  }
  // Waiting since the first look that found it waiting (after a release:
  // the first after its backoff, when the trainers are made again).
  if (!d.status.waiting_since) d.status.waiting_since = now;
  const Clock::time_point due = *d.status.waiting_since + timeout;
  if (now < due || !holding) {
    d.wake_after = now < due ? due - now : Clock::duration(timeout);
    return d;
  }
  d.release = true;
  d.hold_trainers = true;
  d.status.released_at = now;
  d.status.waiting_since.reset();
  ++d.status.releases;
  d.wake_after = d.backoff;
  return d;
}

}  // namespace trainingjob
}  // namespace gaptrain
