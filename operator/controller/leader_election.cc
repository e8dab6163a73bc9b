#include "operator/controller/leader_election.h"

#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <utility>

#include "operator/kube/api_error.h"
#include "operator/kube/resource.h"

namespace gaptrain {
namespace controller {

namespace {

// client-go refuses renew deadlines within this factor of the retry period:
// a renewal needs room for at least one retry.
constexpr double kJitterFactor = 1.2;

// An RFC 1123 DNS subdomain, what a Lease's name must be.
bool IsDnsSubdomain(const std::string& name) {
  if (name.empty() || name.size() > 253) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(name.front()) || !alnum(name.back())) return false;
  for (char c : name) {
    if (!alnum(c) && c != '-' && c != '.') return false;
  }
  return true;
}

std::string Millis(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

}  // namespace

std::string MakeLeaderIdentity(const std::string& pod_name) {
  std::random_device random;
  char suffix[16];
  std::snprintf(suffix, sizeof(suffix), "%08x", static_cast<unsigned>(random()));
  return (pod_name.empty() ? "gaptrain-operator" : pod_name) + "_" + suffix;
}

Status LeaderElector::New(kube::Client* client, LeaderElectionConfig config,
                          std::unique_ptr<LeaderElector>* elector) {
  auto bad = [](const std::string& field, const std::string& why) {
    return Status::InvalidArgument("leader election " + field + ": " + why);
  };
  if (client == nullptr) return bad("client", "must be set");
  if (config.clock == nullptr) return bad("clock", "must be set");
  if (config.identity.empty()) return bad("identity", "must not be empty (MakeLeaderIdentity)");
  if (!IsDnsSubdomain(config.lease_name)) {
    return bad("lease_name", "'" + config.lease_name + "' is not a DNS subdomain name");
  }
  if (config.retry_period.count() <= 0) return bad("retry_period", "must be > 0");
  if (config.lease_duration.count() <= 0 || config.lease_duration.count() % 1000 != 0) {
    return bad("lease_duration",
               "must be a positive whole number of seconds, got " + Millis(config.lease_duration));
  }
  if (config.renew_deadline.count() <= kJitterFactor * config.retry_period.count()) {
    return bad("renew_deadline", "must be more than 1.2 * retry_period (" +
                                     Millis(config.retry_period) + "), got " +
                                     Millis(config.renew_deadline));
  }
  if (config.lease_duration <= config.renew_deadline) {
    return bad("lease_duration", "must be more than renew_deadline (" +
                                     Millis(config.renew_deadline) + "), got " +
                                     Millis(config.lease_duration));
  }
  if (!std::isfinite(config.acquire_jitter) || config.acquire_jitter < 0) {
    return bad("acquire_jitter", "must be finite and >= 0");
  }
  const std::chrono::milliseconds margin = config.lease_duration - config.renew_deadline;
  if (client->options().request_timeout > margin) {
    return bad("client", "its request_timeout (" + Millis(client->options().request_timeout) +
                             ") must be at most lease_duration - renew_deadline (" +
                             Millis(margin) + "), or a hung renewal could outlive the lease");
  }
  elector->reset(new LeaderElector(client, std::move(config)));
  return Status::OK();
}

LeaderElector::LeaderElector(kube::Client* client, LeaderElectionConfig config)
    : client_(client),
      config_(std::move(config)),
      ns_(config_.lease_namespace.empty() ? client->default_namespace() : config_.lease_namespace),
      clock_(config_.clock),
      jitter_(std::hash<std::string>()(config_.identity), /*stream=*/0x1ea5e) {}

void LeaderElector::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stop_ = true;
  changed_.notify_all();
}

bool LeaderElector::IsLeader() const {
  std::lock_guard<std::mutex> lock(mu_);
  return leading_;
}

bool LeaderElector::WaitForLeadership(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait_for(lock, timeout, [this] { return leading_ || (ran_ && !running_); });
  return leading_;
}

std::string LeaderElector::ObservedLeader() const {
  std::lock_guard<std::mutex> lock(mu_);
  return observed_leader_;
}

Status LeaderElector::last_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_error_;
}

void LeaderElector::Failed(const Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  last_error_ = status;
}

void LeaderElector::SetLeading(bool leading) {
  std::lock_guard<std::mutex> lock(mu_);
  leading_ = leading;
  changed_.notify_all();
}

void LeaderElector::Observe(const std::string& holder) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (holder == observed_leader_) return;
    observed_leader_ = holder;
  }
  if (config_.on_new_leader) config_.on_new_leader(holder);
}

bool LeaderElector::Sleep(Clock::Duration d) {
  std::unique_lock<std::mutex> lock(mu_);
  const Clock::TimePoint deadline = AddSaturating(clock_->Now(), d);
  while (!stop_ && clock_->Now() < deadline) clock_->WaitUntil(lock, changed_, deadline);
  return !stop_;
}

Clock::Duration LeaderElector::AcquireDelay() {
  const double u = static_cast<double>(jitter_.Next() >> 11) * 0x1.0p-53;  // [0, 1)
  const auto extra = std::chrono::duration_cast<Clock::Duration>(config_.retry_period *
                                                                 (config_.acquire_jitter * u));
  return config_.retry_period + extra;
}

LeaderElector::Attempt LeaderElector::Create() {
  const auto now = clock_->WallNow();
  LeaseRecord record;
  record.holder_identity = config_.identity;
  record.lease_duration_seconds = config_.lease_duration.count() / 1000;
  record.acquire_time = now;
  record.renew_time = now;
  nlohmann::json lease = {{"apiVersion", kube::kLeases.ApiVersion()},
                          {"kind", std::string(kube::kLeases.kind)},
                          {"metadata", {{"name", config_.lease_name}, {"namespace", ns_}}}};
  SetLeaseRecord(record, &lease);
  nlohmann::json created;
  Status s = client_->Create(kube::kLeases, ns_, lease, &created);
  if (!s.ok()) {
    Failed(s);  // AlreadyExists: another candidate created it first
    return Attempt::kFailed;
  }
  own_lease_ = std::move(created);
  Observe(config_.identity);
  return Attempt::kHeld;
}

LeaderElector::Attempt LeaderElector::Write(nlohmann::json lease, const LeaseRecord& record) {
  SetLeaseRecord(record, &lease);
  nlohmann::json written;
  Status s = client_->Update(kube::kLeases, ns_, lease, &written);
  if (!s.ok()) {
    Failed(s);  // a 409: another candidate wrote first
    return Attempt::kFailed;
  }
  own_lease_ = std::move(written);
  Observe(record.holder_identity);
  return Attempt::kHeld;
}

LeaderElector::Attempt LeaderElector::TryAcquireOrRenew() {
  const auto now = clock_->WallNow();
  const int64_t duration_seconds = config_.lease_duration.count() / 1000;
  const bool leading = IsLeader();
  if (leading && own_lease_) {
    // Renew without reading first; the resourceVersion guards the write.
    LeaseRecord record;
    if (ParseLeaseRecord(*own_lease_, &record).ok()) {
      record.renew_time = now;
      record.lease_duration_seconds = duration_seconds;
      nlohmann::json lease = std::move(*own_lease_);
      own_lease_.reset();
      SetLeaseRecord(record, &lease);
      nlohmann::json written;
      Status s = client_->Update(kube::kLeases, ns_, lease, &written);
      if (s.ok()) {
        own_lease_ = std::move(written);
        return Attempt::kHeld;
      }
      Failed(s);
      if (!kube::IsConflict(s)) return Attempt::kFailed;
      // Someone else wrote the Lease: read it to see who holds it now.
    }
    own_lease_.reset();
  }

  nlohmann::json lease;
  Status s = client_->Get(kube::kLeases, ns_, config_.lease_name, &lease);
  if (kube::IsNotFound(s)) return Create();
  if (!s.ok()) {
    Failed(s);
    return Attempt::kFailed;
  }
  LeaseRecord old;
  s = ParseLeaseRecord(lease, &old);
  if (!s.ok()) {
    Failed(s);
    return Attempt::kFailed;
  }
  Observe(old.holder_identity);
  const bool ours = old.holder_identity == config_.identity;
  if (leading && !ours) return Attempt::kHeldByOther;
  if (!ours && !old.holder_identity.empty()) {
    const int64_t held_for =
        old.lease_duration_seconds > 0 ? old.lease_duration_seconds : duration_seconds;
    const bool expired = !old.renew_time || *old.renew_time + std::chrono::seconds(held_for) < now;
    if (!expired) return Attempt::kHeldByOther;
  }
  LeaseRecord record = old;
  record.holder_identity = config_.identity;
  record.lease_duration_seconds = duration_seconds;
  record.renew_time = now;
  if (!ours) {
    record.acquire_time = now;
    record.lease_transitions = old.lease_transitions + 1;
  }
  return Write(std::move(lease), record);
}

void LeaderElector::Release() {
  if (!own_lease_) return;  // nothing current to release; the Lease expires by itself
  LeaseRecord record;
  if (!ParseLeaseRecord(*own_lease_, &record).ok()) return;
  const auto now = clock_->WallNow();
  record.holder_identity.clear();
  record.lease_duration_seconds = 1;
  record.acquire_time = now;
  record.renew_time = now;
  Write(std::move(*own_lease_), record);
  own_lease_.reset();
}

void LeaderElector::Run() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ran_) return;
    ran_ = true;
    running_ = true;
  }
  Clock::TimePoint last_renewal;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) break;
    }
    last_renewal = clock_->Now();
    if (TryAcquireOrRenew() == Attempt::kHeld) {
      SetLeading(true);
      break;
    }
    if (!Sleep(AcquireDelay())) break;
  }

  if (IsLeader()) {
    if (config_.on_started_leading) config_.on_started_leading();
    bool lost = false;
    while (Sleep(config_.retry_period)) {
      const Clock::TimePoint attempt = clock_->Now();
      const Attempt result = TryAcquireOrRenew();
      if (result == Attempt::kHeld) {
        last_renewal = attempt;
        continue;
      }
      if (result == Attempt::kHeldByOther ||
          clock_->Now() - last_renewal >= config_.renew_deadline) {
        lost = true;
        break;
      }
    }
    if (lost) {
      SetLeading(false);
      own_lease_.reset();
    } else {
      if (config_.release_on_stop) Release();
      SetLeading(false);
    }
    if (config_.on_stopped_leading) {
      config_.on_stopped_leading(lost ? LeadershipEnd::kLost : LeadershipEnd::kStopped);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  running_ = false;
  changed_.notify_all();
}

}  // namespace controller
}  // namespace gaptrain
