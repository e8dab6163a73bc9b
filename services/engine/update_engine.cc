#include "services/engine/update_engine.h"

#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "services/engine/rules/kernel_util.h"
#include "services/numeric/finite_scan.h"

namespace gaptrain {
namespace {

std::string Worker(WorkerId w) { return "worker " + std::to_string(w); }

// "value 17 (tensor 'fc1.weight', element 5)"
std::string DescribeIndex(const ParameterLayout& layout, size_t index) {
  const TensorSpec& t = layout.tensors()[layout.TensorIndexOf(index)];
  return "value " + std::to_string(index) + " (tensor '" + t.name + "', element " +
         std::to_string(index - t.offset) + ")";
}

bool IsBf16(const WorkerCopyView& v) { return v.dtype == DType::kBfloat16; }

}  // namespace

const char* RejectReasonName(RejectReason reason) {
  switch (reason) {
    case RejectReason::kUnknownWorker: return "unknown_worker";
    case RejectReason::kWrongSize: return "wrong_size";
    case RejectReason::kNonFinite: return "non_finite";
    case RejectReason::kFutureVersion: return "future_version";
    case RejectReason::kTooStale: return "too_stale";
    case RejectReason::kNoWorkerCopy: return "no_worker_copy";
    case RejectReason::kDuplicate: return "duplicate";
    case RejectReason::kMalformed: return "malformed";
    case RejectReason::kIncomplete: return "incomplete";
    case RejectReason::kNumReasons: break;
  }
  return "unknown";
}

Status UpdateEngine::Create(ParameterLayout layout, const Options& options,
                            std::unique_ptr<UpdateEngine>* engine) {
  GAPTRAIN_RETURN_IF_ERROR(options.rule.Validate());
  GAPTRAIN_RETURN_IF_ERROR(options.schedule.Validate());
  if (layout.size() == 0) return Status::InvalidArgument("model: has no parameters");
  engine->reset(new UpdateEngine(std::make_unique<ParameterStore>(std::move(layout)), options));
  return Status::OK();
}

Status UpdateEngine::Restore(std::unique_ptr<ParameterStore> store,
                             const std::vector<WorkerId>& members, const Options& options,
                             std::unique_ptr<UpdateEngine>* engine) {
  GAPTRAIN_RETURN_IF_ERROR(options.rule.Validate());
  GAPTRAIN_RETURN_IF_ERROR(options.schedule.Validate());
  if (store == nullptr || store->size() == 0) {
    return Status::InvalidArgument("restore: the checkpoint holds no parameters");
  }
  for (const auto& [name, buffer] : store->buffers()) {
    if (buffer.size() != store->size()) {
      return Status::DataLoss("restore: state '" + name + "' has " +
                              std::to_string(buffer.size()) + " values, the model has " +
                              std::to_string(store->size()));
    }
  }
  std::unique_ptr<UpdateEngine> e(new UpdateEngine(std::move(store), options));
  for (WorkerId w : members) {
    if (e->IsMember(w)) continue;
    e->workers_[w] = WorkerRecord();
    // Per-worker buffers the checkpoint has are kept; missing ones are created.
    bool has_state = false;
    for (const char* what : {kWorkerMomentum, kWorkerCopy}) {
      has_state = has_state || e->store_->buffer(WorkerStateName(w, what)) != nullptr;
    }
    if (!has_state) {
      e->workers_.erase(w);
      GAPTRAIN_RETURN_IF_ERROR(e->Join(w));
    }
  }
  *engine = std::move(e);
  return Status::OK();
}

UpdateEngine::UpdateEngine(std::unique_ptr<ParameterStore> store, const Options& options)
    : store_(std::move(store)),
      rule_(CreateUpdateRule(options.rule)),
      schedule_(options.schedule),
      max_updates_(options.max_updates) {
  rule_->InitState(store_.get());
}

std::vector<WorkerId> UpdateEngine::members() const {
  std::vector<WorkerId> ids;
  ids.reserve(workers_.size());
  for (const auto& [id, record] : workers_) ids.push_back(id);
  return ids;
}

bool UpdateEngine::keeps_snapshots() const {
  return rule_->config().NeedsWorkerCopy() &&
         rule_->config().gap_source == GapSource::kSnapshot;
}

Status UpdateEngine::Join(WorkerId worker) {
  if (IsMember(worker)) return Status::AlreadyExists(Worker(worker) + " has already joined");
  ++reply_generation_;
  ++pull_epoch_;
  workers_[worker] = WorkerRecord();
  rule_->AddWorker(worker, store_.get());
  if (keeps_snapshots()) {
    DType dtype = rule_->config().gap_precision == GapPrecision::kBfloat16 ? DType::kBfloat16
                                                                           : DType::kFloat32;
    store_->AddBuffer(WorkerStateName(worker, kWorkerCopy), dtype);
  }
  return Status::OK();
}

Status UpdateEngine::Leave(WorkerId worker, ApplyStats* stats) {
  if (!IsMember(worker)) return Status::NotFound(Worker(worker) + " is not a member");
  ++reply_generation_;
  ++pull_epoch_;
  rule_->RemoveWorker(worker, store_.get());
  store_->RemoveBuffer(WorkerStateName(worker, kWorkerCopy));
  workers_.erase(worker);

  ApplyStats local;
  ApplyStats* s = stats != nullptr ? stats : &local;
  ResetStats(s);
  s->outcome = ApplyStats::Outcome::kAccumulated;
  const double lr = learning_rate();
  if (rule_->OnMembershipChange(workers_.size(), lr, store_.get(), s)) {
    s->learning_rate = lr;
    CompleteStep();
  }
  return Status::OK();
}

Status UpdateEngine::Pull(WorkerId worker, float* out, size_t out_size, uint64_t* version) {
  if (!IsMember(worker)) return Status::NotFound(Worker(worker) + " has not joined");
  if (out_size != store_->size()) {
    return Status::InvalidArgument("pull buffer has " + std::to_string(out_size) +
                                   " values, the model has " + std::to_string(store_->size()));
  }
  rule_->WriteReply(worker, learning_rate(), *store_, out);
  return PullFrom(worker, out, out_size, version);
}

Status UpdateEngine::PullFrom(WorkerId worker, const float* reply, size_t reply_size,
                              uint64_t* version) {
  auto it = workers_.find(worker);
  if (it == workers_.end()) return Status::NotFound(Worker(worker) + " has not joined");
  if (reply_size != store_->size()) {
    return Status::InvalidArgument("pull buffer has " + std::to_string(reply_size) +
                                   " values, the model has " + std::to_string(store_->size()));
  }
  if (keeps_snapshots()) {
    store_->buffer(WorkerStateName(worker, kWorkerCopy))->CopyFrom(reply);
    it->second.has_copy = true;
    it->second.copy_version = store_->version();
  }
  it->second.has_pulled = true;
  it->second.pulled_version = store_->version();
  it->second.pulled_epoch = pull_epoch_;
  *version = store_->version();
  return Status::OK();
}

Status UpdateEngine::PullModel(float* out, size_t out_size, uint64_t* version) const {
  if (out_size != store_->size()) {
    return Status::InvalidArgument("pull buffer has " + std::to_string(out_size) +
                                   " values, the model has " + std::to_string(store_->size()));
  }
  std::memcpy(out, store_->params(), out_size * sizeof(float));
  *version = store_->version();
  return Status::OK();
}

Status UpdateEngine::Reject(RejectReason reason, Status status) {
  ++rejected_[static_cast<size_t>(reason)];
  last_reject_ = reason;
  return status;
}

bool UpdateEngine::NeedsPull(WorkerId worker, int64_t known_version) const {
  auto it = workers_.find(worker);
  if (it == workers_.end() || known_version < 0 ||
      static_cast<uint64_t>(known_version) != store_->version()) {
    return true;
  }
  const WorkerRecord& r = it->second;
  return !(r.has_pulled && r.pulled_version == store_->version() && r.pulled_epoch == pull_epoch_);
}

Status UpdateEngine::ValidatePush(const PushRequest& request, const WorkerRecord& record,
                                  WorkerCopyView* copy) {
  const RuleConfig& config = rule_->config();
  const size_t p = store_->size();
  const uint64_t version = store_->version();
  const std::string who = Worker(request.worker);

  if (request.gradient.empty() || request.gradient.size() != p) {
    return Reject(RejectReason::kWrongSize,
                  Status::InvalidArgument(who + ": gradient has " +
                                          std::to_string(request.gradient.size()) +
                                          " values, the model has " + std::to_string(p)));
  }
  if (request.base_version > version) {
    return Reject(RejectReason::kFutureVersion,
                  Status::OutOfRange(who + ": base version " +
                                     std::to_string(request.base_version) +
                                     " is ahead of the master's " + std::to_string(version)));
  }
  const uint64_t staleness = version - request.base_version;
  if (config.kind != RuleKind::kSync && config.max_staleness > 0 &&
      staleness > config.max_staleness) {
    return Reject(RejectReason::kTooStale,
                  Status::FailedPrecondition(who + ": staleness " + std::to_string(staleness) +
                                             " exceeds maxStaleness " +
                                             std::to_string(config.max_staleness)));
  }
  if (config.kind == RuleKind::kSync && record.has_pushed &&
      record.last_push_base == request.base_version && request.base_version == version) {
    return Reject(RejectReason::kDuplicate,
                  Status::AlreadyExists(who + " already pushed a gradient for step " +
                                        std::to_string(version)));
  }

  if (config.NeedsWorkerCopy()) {
    if (config.gap_source == GapSource::kSnapshot) {
      if (!record.has_copy || record.copy_version != request.base_version) {
        return Reject(RejectReason::kNoWorkerCopy,
                      Status::FailedPrecondition(
                          who + ": pushed a gradient for version " +
                          std::to_string(request.base_version) +
                          (record.has_copy
                               ? " but its last pull was version " +
                                     std::to_string(record.copy_version)
                               : " but has never pulled")));
      }
      const FlatBuffer* snapshot = store_->buffer(WorkerStateName(request.worker, kWorkerCopy));
      copy->dtype = snapshot->dtype();
      copy->data = snapshot->data();
    } else {
      if (request.echo.data == nullptr) {
        return Reject(RejectReason::kNoWorkerCopy,
                      Status::InvalidArgument(who + ": gapSource is echo but the push carries "
                                                    "no copy of the parameters"));
      }
      if (request.echo_size != p) {
        return Reject(RejectReason::kWrongSize,
                      Status::InvalidArgument(who + ": echoed copy has " +
                                              std::to_string(request.echo_size) +
                                              " values, the model has " + std::to_string(p)));
      }
      size_t bad = request.known_finite ? p
                   : IsBf16(request.echo)  ? FindNonFinite(request.echo.bf16(), p)
                                           : FindNonFinite(request.echo.f32(), p);
      if (bad != p) {
        return Reject(RejectReason::kNonFinite,
                      Status::InvalidArgument(who + ": echoed copy " +
                                              DescribeIndex(store_->layout(), bad) +
                                              " is not finite"));
      }
      *copy = request.echo;
    }
  }

  size_t bad = request.known_finite ? p : request.gradient.FindNonFinite();
  if (bad != p) {
    float value = request.gradient.At(bad);
    return Reject(RejectReason::kNonFinite,
                  Status::InvalidArgument(who + ": gradient " +
                                          DescribeIndex(store_->layout(), bad) + " is " +
                                          (std::isnan(value) ? "NaN" : "Inf")));
  }
  return Status::OK();
}

Status UpdateEngine::Push(const PushRequest& request, ApplyStats* stats, RejectReason* reason) {
  auto it = workers_.find(request.worker);
  Status valid;
  PushContext push;
  if (it == workers_.end()) {
    valid = Reject(RejectReason::kUnknownWorker,
                   Status::NotFound(Worker(request.worker) + " has not joined"));
  } else {
    valid = ValidatePush(request, it->second, &push.copy);
  }
  if (!valid.ok()) {
    if (reason != nullptr) *reason = last_reject_;
    return valid;
  }
  WorkerRecord& record = it->second;

  if (max_updates_ > 0 && store_->version() >= max_updates_) {
    ResetStats(stats);
    stats->outcome = ApplyStats::Outcome::kDiscardedFinished;
    stats->staleness = store_->version() - request.base_version;
    ++discarded_finished_;
    return Status::OK();
  }

  push.worker = request.worker;
  push.gradient = request.gradient;
  push.base_version = request.base_version;
  push.staleness = store_->version() - request.base_version;
  push.learning_rate = learning_rate();
  push.live_workers = workers_.size();

  ResetStats(stats);
  stats->staleness = push.staleness;
  ++reply_generation_;
  rule_->Apply(push, store_.get(), stats);

  switch (stats->outcome) {
    case ApplyStats::Outcome::kApplied:
      stats->learning_rate = push.learning_rate;
      CompleteStep();
      break;
    case ApplyStats::Outcome::kAccumulated:
      break;
    case ApplyStats::Outcome::kDiscardedLate:
      ++discarded_late_;
      return Status::OK();
    case ApplyStats::Outcome::kDiscardedFinished:  // decided above, never by a rule
      return Status::OK();
  }
  record.has_pushed = true;
  record.last_push_base = request.base_version;
  return Status::OK();
}

void UpdateEngine::CompleteStep() {
  store_->set_version(store_->version() + 1);
  ++applied_;
}

void UpdateEngine::ResetStats(ApplyStats* stats) {
  stats->outcome = ApplyStats::Outcome::kApplied;
  stats->staleness = 0;
  stats->learning_rate = 0.0;
  stats->penalty_mean = 1.0;
  stats->has_gap = false;
  stats->gap = GapStats();
  stats->per_tensor.clear();  // keeps capacity: no allocation per push
  stats->aggregated = 0;
}

}  // namespace gaptrain
