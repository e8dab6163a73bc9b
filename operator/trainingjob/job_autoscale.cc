#include "operator/trainingjob/job_autoscale.h"

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "operator/trainingjob/job_conditions.h"
#include "operator/trainingjob/object_fields.h"
#include "services/autoscale/autoscale_policy.h"

namespace gaptrain {
namespace trainingjob {
namespace {

using nlohmann::json;
using Clock = std::chrono::system_clock;

// Where the current measurement began.
struct Window {
  Clock::time_point start;
  double model_version = 0;
  double gap_sum = 0;
  double gap_count = 0;
  uint64_t preemptions = 0;
};

bool Total(const std::optional<double>& v) { return v && std::isfinite(*v) && *v >= 0; }

std::optional<Window> ReadWindow(const json& autoscale) {
  const json& w = ObjectAt(autoscale, {"window"});
  const std::optional<Clock::time_point> start = ParseMicroTime(StringAt(w, {"startTime"}));
  const std::optional<double> version = NumberAt(w, {"modelVersion"});
  const std::optional<double> gap_sum = NumberAt(w, {"gapSum"});
  const std::optional<double> gap_count = NumberAt(w, {"gapCount"});
  const std::optional<int64_t> preemptions = IntegerAt(w, {"preemptions"});
  if (!start || !Total(version) || !Total(gap_sum) || !Total(gap_count) || !preemptions ||
      *preemptions < 0) {
    return std::nullopt;
  }
  return Window{*start, *version, *gap_sum, *gap_count, static_cast<uint64_t>(*preemptions)};
}

json WindowAt(const MasterScrape& master, uint64_t preemptions) {
  return {{"startTime", FormatMicroTime(master.at)},
          {"modelVersion", master.model_version},
          {"gapSum", master.gap_sum},
          {"gapCount", master.gap_count},
          {"preemptions", preemptions}};
}

// A count kept in the status: a non-negative integer, else 0.
uint32_t CountAt(const json& autoscale, FieldPath path) {
  const std::optional<int64_t> v = IntegerAt(autoscale, path);
  return v && *v > 0 && *v <= UINT32_MAX ? static_cast<uint32_t>(*v) : 0;
}

AutoscaleMemory ReadMemory(const json& autoscale) {
  AutoscaleMemory memory;
  memory.grown_from = CountAt(autoscale, {"grownFrom"});
  memory.unprofitable = CountAt(autoscale, {"unprofitable"});
  const std::optional<double> rate = NumberAt(autoscale, {"rateBefore"});
  memory.rate_before = Total(rate) ? *rate : 0;
  return memory;
}

bool ChangesTrainers(const std::string& reason) {
  return reason == "ScaledUp" || reason == "ScaledDown";
}

// A growth or shrink recorded in lastDecision and not yet carried out: the
// spec is still the one it was decided at, and asks for another number.
std::optional<uint32_t> WaitingScale(const AutoscaleObservation& o, const json& last) {
  if (!ChangesTrainers(StringAt(last, {"reason"}))) return std::nullopt;
  const std::optional<int64_t> decided_at = IntegerAt(last, {"observedGeneration"});
  const std::optional<int64_t> replicas = IntegerAt(last, {"replicas"});
  if (!decided_at || *decided_at != o.generation || !replicas) return std::nullopt;
  if (*replicas < o.workers.Floor() || *replicas > o.workers.Ceiling() ||
      *replicas == o.workers.replicas) {
    return std::nullopt;
  }
  return static_cast<uint32_t>(*replicas);
}

}  // namespace

std::string FormatMicroTime(Clock::time_point time) {
  const int64_t micros =
      std::chrono::duration_cast<std::chrono::microseconds>(time.time_since_epoch()).count();
  int64_t seconds = micros / 1000000;
  int64_t fraction = micros % 1000000;
  if (fraction < 0) {
    fraction += 1000000;
    --seconds;
  }
  const std::time_t t = static_cast<std::time_t>(seconds);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char whole[32];
  std::strftime(whole, sizeof whole, "%Y-%m-%dT%H:%M:%S", &utc);
  char text[48];
  std::snprintf(text, sizeof text, "%s.%06" PRId64 "Z", whole, fraction);
  return text;
}

std::optional<Clock::time_point> ParseMicroTime(const std::string& text) {
  const std::optional<Clock::time_point> whole = ParseTime(text);
  if (!whole) return std::nullopt;
  int64_t micros = 0;
  int digits = 0;
  constexpr size_t kFraction = 19;  // "2026-11-23T06:00:00" then "." or "Z"
  if (text.size() > kFraction && text[kFraction] == '.') {
    for (size_t i = kFraction + 1;
         i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) && digits < 6;
         ++i, ++digits) {
      micros = micros * 10 + (text[i] - '0');
    }
  }
  for (; digits < 6; ++digits) micros *= 10;
  return *whole + std::chrono::duration_cast<Clock::duration>(std::chrono::microseconds(micros));
}

AutoscalePlan PlanAutoscale(const AutoscaleObservation& o) {
  AutoscalePlan plan;
  static const json* const kNone = new json(json::object());
  const json& old = o.status.is_object() ? o.status : *kNone;
  const json& last = ObjectAt(old, {"lastDecision"});
  const AutoscaleSpec& spec = o.workers.autoscale;
  if (!spec.enabled) {
    if (!last.empty()) plan.status = {{"lastDecision", last}};
    return plan;
  }
  plan.status = old;
  if (!o.job_running) {
    plan.status.erase("window");
    return plan;
  }
  const auto interval = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(spec.interval_seconds));

  if (const std::optional<uint32_t> waiting = WaitingScale(o, last)) {
    plan.scale_to = *waiting;
    plan.reason = StringAt(last, {"reason"});
    plan.message = StringAt(last, {"message"});
    return plan;
  }
  if (!o.master) {
    plan.next_check = interval;  // the master may answer by then
    return plan;
  }
  const MasterScrape& now = *o.master;
  const std::optional<Window> window = ReadWindow(old);
  if (!window || now.at < window->start || now.model_version < window->model_version ||
      now.gap_sum < window->gap_sum || now.gap_count < window->gap_count) {
    plan.status["window"] = WindowAt(now, o.preemptions);
    plan.next_check = interval;
    return plan;
  }
  const Clock::time_point due = window->start + interval;
  if (now.at < due) {
    plan.next_check = due - o.now;
    return plan;
  }

  AutoscaleWindow measured;
  measured.replicas = o.workers.replicas;
  measured.running = std::min(o.running_trainers, o.workers.replicas);
  measured.preemptions = o.preemptions > window->preemptions
                             ? static_cast<uint32_t>(o.preemptions - window->preemptions)
                             : 0;
  measured.seconds = std::chrono::duration<double>(now.at - window->start).count();
  measured.updates = now.model_version - window->model_version;
  measured.gap_sum = now.gap_sum - window->gap_sum;
  measured.gap_count = now.gap_count - window->gap_count;
  AutoscaleMemory memory = ReadMemory(old);
  const AutoscaleDecision decision = DecideTrainers(o.workers, measured, &memory);

  plan.status["window"] = WindowAt(now, o.preemptions);
  plan.status["grownFrom"] = memory.grown_from;
  plan.status["rateBefore"] = memory.rate_before;
  plan.status["unprofitable"] = memory.unprofitable;
  plan.status["lastDecision"] = {
      {"time", FormatTime(o.now)},          {"reason", decision.Reason()},
      {"fromReplicas", o.workers.replicas}, {"replicas", decision.replicas},
      {"message", decision.message},        {"observedGeneration", o.generation}};
  if (decision.replicas != o.workers.replicas && ChangesTrainers(decision.Reason())) {
    plan.scale_to = decision.replicas;
    plan.reason = decision.Reason();
    plan.message = decision.message;
  }
  plan.next_check = interval;
  return plan;
}

}  // namespace trainingjob
}  // namespace gaptrain
