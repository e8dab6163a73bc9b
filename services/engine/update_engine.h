// UpdateEngine: the master's model and update logic, without the network.
// It owns the ParameterStore and the job's UpdateRule and offers the verbs a
// parameter server needs: Join, Leave, Pull, Push. Every push is validated
// before anything is touched: a rejected push leaves the store
// bit-identical, is counted by reason, and returns a Status that names the
// problem.
//
// Not thread-safe: the master service serialises calls (one mutex), and
// keeps network I/O outside it.

#ifndef GAPTRAIN_SERVICES_ENGINE_UPDATE_ENGINE_H_
#define GAPTRAIN_SERVICES_ENGINE_UPDATE_ENGINE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "services/base/status.h"
#include "services/engine/apply_stats.h"
#include "services/engine/gradient_view.h"
#include "services/engine/learning_rate_schedule.h"
#include "services/engine/parameter_store.h"
#include "services/engine/rules/rule_config.h"
#include "services/engine/rules/update_rule.h"

namespace gaptrain {

// A gradient as it arrives from worker `worker`.
struct PushRequest {
  WorkerId worker = 0;
  uint64_t base_version = 0;  // s: the version the worker pulled
  GradientView gradient;  // a float array, or the push's wire bytes
  // gapSource echo: the worker's copy θ⁽ⁱ⁾ (fp32 or bf16), echo_size values.
  WorkerCopyView echo;
  size_t echo_size = 0;
  // Set only when the caller has already found every gradient and echo
  // value finite (MasterService checks each chunk as it decodes it): the
  // engine then skips its own scan. When false the engine scans, and
  // rejects a NaN or Inf naming the value.
  bool known_finite = false;
};

enum class RejectReason {
  kUnknownWorker,  // never joined, or left
  kWrongSize,      // gradient or echo length is not P
  kNonFinite,      // NaN or Inf in the gradient or echo
  kFutureVersion,  // base version ahead of the master
  kTooStale,       // τ above maxStaleness
  kNoWorkerCopy,   // snapshot of another version, or echo missing
  kDuplicate,      // sync: a second gradient for the same step
  kMalformed,      // the wire stream was inconsistent (counted by the service)
  kIncomplete,     // the stream ended or broke before every value arrived (service)
  kNumReasons,
};

// Metric label of a reason: "unknown_worker", "wrong_size", ...
const char* RejectReasonName(RejectReason reason);

class UpdateEngine {
 public:
  struct Options {
    RuleConfig rule;
    ScheduleConfig schedule;
    // The job's spec.training.maxUpdates: a valid push that arrives once θ
    // is at this version is discarded (kDiscardedFinished), so the job
    // ends at exactly this many updates however fast its workers push
    // before the coordinator ends it. 0: no limit (an epochs job).
    uint64_t max_updates = 0;
  };

  // Validates `options` and creates an engine over a zero-filled model of
  // `layout`; write initial parameters through mutable_store().
  static Status Create(ParameterLayout layout, const Options& options,
                       std::unique_ptr<UpdateEngine>* engine);

  // Resumes from a store read back from a checkpoint, with `members` as the
  // joined workers. Shared rule state the store lacks is created zeroed;
  // per-worker state a member lacks is created as on Join. Members must
  // pull again before their next push (their old snapshots' versions are
  // not trusted). Fails if the store's buffers do not fit the model.
  static Status Restore(std::unique_ptr<ParameterStore> store,
                        const std::vector<WorkerId>& members, const Options& options,
                        std::unique_ptr<UpdateEngine>* engine);

  UpdateEngine(const UpdateEngine&) = delete;
  UpdateEngine& operator=(const UpdateEngine&) = delete;

  // Membership. Join creates the worker's rule state (AlreadyExists if it is
  // a member); Leave releases it (NotFound if it is not). In sync mode a
  // Leave may complete the pending step: `stats` (optional) then reports it.
  Status Join(WorkerId worker);
  Status Leave(WorkerId worker, ApplyStats* stats = nullptr);
  bool IsMember(WorkerId worker) const { return workers_.count(worker) != 0; }
  size_t num_workers() const { return workers_.size(); }
  std::vector<WorkerId> members() const;

  // Writes the point `worker` should compute on (out_size must be P) and
  // its version; with gapSource snapshot it also records that copy. The
  // point is the same for every worker.
  Status Pull(WorkerId worker, float* out, size_t out_size, uint64_t* version);

  // The same pull for a caller that already holds the reply: `reply` (P
  // values) must be what Pull wrote at the current reply_generation().
  // Records it as `worker`'s copy where Pull would, without recomputing it.
  Status PullFrom(WorkerId worker, const float* reply, size_t reply_size, uint64_t* version);

  // Writes θ itself (out_size must be P) and its version: the model to
  // evaluate and save, for a reader that need not be a member (the
  // evaluator). Records nothing.
  Status PullModel(float* out, size_t out_size, uint64_t* version) const;

  // False when `worker` already holds the current reply: it is a member,
  // `known_version` is the current version, and its last Pull or PullFrom
  // was of this version with no join, leave or mutable_store() since (they
  // change a reply without a new version: DANA's point moves with the
  // members), so the reply is the same and, with snapshots, the engine
  // holds its copy. A pull can then skip the payload. Pushes that leave
  // the version alone (sync: accumulated, discarded late) do not count, so
  // a worker waiting for the step gets no payload until it completes.
  bool NeedsPull(WorkerId worker, int64_t known_version) const;

  // Validates and applies one gradient. On rejection, *reason (optional)
  // says why.
  Status Push(const PushRequest& request, ApplyStats* stats, RejectReason* reason = nullptr);

  uint64_t version() const { return store_->version(); }

  // Moves whenever what Pull or PullModel writes may change: a push that
  // reached the rule, a member joining or leaving, a call of
  // mutable_store(). While it stands, every Pull writes the same values and
  // so does every PullModel, so a caller may keep one copy of each and
  // serve it again (MasterService shares one per generation among pulls).
  uint64_t reply_generation() const { return reply_generation_; }

  // η of the next update.
  double learning_rate() const { return schedule_.At(store_->version()); }

  const ParameterStore& store() const { return *store_; }
  // Write through it before replies are served, not later: it moves
  // reply_generation() only when called.
  ParameterStore* mutable_store() {
    ++reply_generation_;
    ++pull_epoch_;
    return store_.get();
  }
  const RuleConfig& rule_config() const { return rule_->config(); }
  const LearningRateSchedule& schedule() const { return schedule_; }

  uint64_t rejected(RejectReason reason) const {
    return rejected_[static_cast<size_t>(reason)];
  }
  uint64_t applied() const { return applied_; }
  uint64_t discarded_late() const { return discarded_late_; }
  uint64_t discarded_finished() const { return discarded_finished_; }
  // θ is at the job's maxUpdates: nothing more is applied.
  bool finished() const { return max_updates_ > 0 && store_->version() >= max_updates_; }

 private:
  struct WorkerRecord {
    bool has_copy = false;        // snapshot recorded by a pull
    uint64_t copy_version = 0;    // version of that snapshot
    bool has_pulled = false;      // a Pull or PullFrom since joining
    uint64_t pulled_version = 0;  // the version and pull_epoch_ of the last one
    uint64_t pulled_epoch = 0;
    bool has_pushed = false;      // sync duplicate detection
    uint64_t last_push_base = 0;
  };

  UpdateEngine(std::unique_ptr<ParameterStore> store, const Options& options);

  // True when the engine records each pull as the worker's copy θ⁽ⁱ⁾.
  bool keeps_snapshots() const;
  // Counts a rejection, remembers it for Push's caller, and passes its
  // status through.
  Status Reject(RejectReason reason, Status status);
  // Every check a push must pass; on success *copy is θ⁽ⁱ⁾ when needed.
  Status ValidatePush(const PushRequest& request, const WorkerRecord& record,
                      WorkerCopyView* copy);
  // The rule applied an update: advance the version.
  void CompleteStep();
  static void ResetStats(ApplyStats* stats);

  std::unique_ptr<ParameterStore> store_;
  std::unique_ptr<UpdateRule> rule_;
  LearningRateSchedule schedule_;
  std::map<WorkerId, WorkerRecord> workers_;
  std::array<uint64_t, static_cast<size_t>(RejectReason::kNumReasons)> rejected_{};
  uint64_t applied_ = 0;
  uint64_t discarded_late_ = 0;
  uint64_t discarded_finished_ = 0;
  const uint64_t max_updates_;
  uint64_t reply_generation_ = 0;
  uint64_t pull_epoch_ = 0;  // moves when a reply changes without a new version
  RejectReason last_reject_ = RejectReason::kNumReasons;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_ENGINE_UPDATE_ENGINE_H_
