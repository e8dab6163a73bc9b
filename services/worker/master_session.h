// MasterSession: a trainer's half of the parameter-server protocol, as
// ps-lite's KVWorker is one: the training loop pulls θ into its model,
// computes, pushes, and asks what a refusal means; this owns everything in
// between (docs/worker.md):
//   - the version a gradient was computed on, and a whole pull after any
//     failed call (the model's buffer may hold part of a reply);
//   - PushPull (the push and the next step's θ in one call), and Push then
//     Pull for good against a master without it;
//   - what the master's rule needs from a push, as Describe says: the copy
//     θ was pulled as (gapSource echo, bf16 on a bf16 wire), DANA-Slim's
//     u = g' + γv with the worker's momentum (kept only when a push is
//     applied), and in sync mode a wait until the step is out;
//   - the module's buffers (BatchNorm's statistics): taken from the master
//     at start, sent every kPushesPerBufferSend pushes and at task ends;
//   - the master's runs: an answer from another run than Connect()'s marks
//     run_changed(); TakeLost() learns what the new run resumed from and
//     which of the task's pushes it lost, and AddReached() says where the
//     task's updates are for its completion;
//   - several masters (spec.master.shards), each holding a range of θ
//     (services/engine/shard_plan.h): every pull and push goes to all of
//     them at once, each with its slice, and each keeps its own version,
//     runs and refusals. A push refused by one shard and applied by the
//     others is sent again, recomputed, to that shard only. The version the
//     coordinator hears of is the lowest of the shards'. A batch a shard's
//     restart lost is trained again on all shards (the others apply it
//     twice, as a retrained task does);
//   - what a failed call means (AfterPullFailure, AfterPushFailure): the
//     wait a retry wants, through the batch's retry loop, and the batch's
//     refusals, up to max_recomputes.
// The training loop keeps the data, the model's compute, the retry loop's
// policy and the grace period. The evaluator uses its observer side (Observe).
// Not thread-safe: one training or evaluation loop owns it.

#ifndef GAPTRAIN_SERVICES_WORKER_MASTER_SESSION_H_
#define GAPTRAIN_SERVICES_WORKER_MASTER_SESSION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "proto/gaptrain.pb.h"
#include "services/api/training_job.h"
#include "services/base/status.h"
#include "services/learn/epoch_order.h"
#include "services/learn/model.h"
#include "services/master/master_client.h"
#include "services/numeric/bfloat16.h"
#include "services/worker/coordinator_session.h"
#include "services/worker/master_link.h"
#include "services/worker/moving_duration.h"
#include "services/worker/retry.h"
#include "services/worker/shard_calls.h"
#include "services/worker/worker_metrics.h"

namespace gaptrain {

// How often a trainer sends its module buffers (BatchNorm's running
// statistics, which move slowly: momentum 0.1 per batch) to the master: a
// few kilobytes every this many pushes, and when a task ends.
inline constexpr uint32_t kPushesPerBufferSend = 16;

// The masters a registration names: shard i's address at i.
std::vector<std::string> MasterAddressesOf(const proto::RegisterResponse& registration);

class MasterSession {
 public:
  // What the training loop does after a failed Pull or Push; the session
  // has waited where the batch's retry loop asks for it.
  enum class Next {
    kAgain,   // pull, compute and push the batch again: after the retry
              // loop's wait when the master was away or does not know this
              // worker yet (the membership feed), at once after a refusal
              // as stale, without its copy or from the future
    kSkip,    // drop this batch (a bug's INVALID_ARGUMENT, a sync step that
              // has this worker's gradient already, refused
              // max_recomputes times)
    kGiveUp,  // the retry loop would not wait again (stopped, out of
              // attempts or time): the failure stands
    kFail,    // nothing to retry (the token refused, another model)
  };

  // Borrowed: all must outlive the session; `metrics` may be null. The
  // coordinator session hears of every version seen and is asked to
  // heartbeat when the master discards pushes past maxUpdates.
  // A batch the master refuses (stale, not a member) is computed again at
  // most `max_recomputes` times, then skipped.
  MasterSession(const TrainingJob& job, MasterLink::Connector connect,
                CoordinatorSession* coordinator, StopFlag* stop, WorkerMetrics* metrics,
                int max_recomputes = 3);

  // Connects to the masters at `addresses` (shard i at i; one address: one
  // master) for `model` (its layout and buffers must be the masters') and
  // learns what its rule needs; the shards' ranges must be theirs in
  // order and tile θ. Forgets what was pulled: the next Pull() is whole.
  Status Connect(const std::vector<std::string>& addresses, Model* model, RetryLoop* loop);
  // The addresses of the last Connect().
  const std::vector<std::string>& addresses() const { return addresses_; }
  // What shard 0 said (the rule, echo needs, the whole model's layout).
  const proto::DescribeResponse& description() const { return shards_[0].link.description(); }
  bool dana_slim() const { return dana_slim_; }

  // θ into the model's parameters, unless the last push brought the
  // newest already (PushPull).
  Status Pull();
  // Pushes the model's gradient (DANA-Slim's u with that rule) as computed
  // on the last pulled θ from the batch at `positions` of the task in hand,
  // with `loss`. On success *reply is the master's answer, the batch is
  // recorded where it landed (TakeLost, AddReached), and in sync mode the
  // step it entered is out.
  Status Push(float loss, SampleRange positions, proto::PushResponse* reply);
  // Forgets a PushPull's θ: the next Pull() asks the master (a task's
  // first batch starts from θ read after the task's own calls).
  void ForgetPulled() {
    for (Shard& shard : shards_) shard.pulled_with_push = false;
  }

  // The evaluator's side. Observe: θ into the model with an observer pull
  // (θ itself, not DANA's look-ahead; no membership, so sync mode too),
  // transient failures retried through `loop`; *version is θ's. Then
  // ObserveBuffers: the master's module buffers (BatchNorm's statistics,
  // the trainers' average) into the model, so it is evaluated as trained.
  // Version: the master's version now (Describe), retried alike.
  Status Observe(RetryLoop* loop, uint64_t* version);
  Status ObserveBuffers(RetryLoop* loop);
  Status Version(RetryLoop* loop, uint64_t* version);

  // A new batch: its refusals are counted from zero.
  void BeginBatch() { batch_refusals_ = 0; }
  // What the caller does after Pull() or Push() failed with `failure`,
  // having waited through `loop` (the batch's) where a retry wants it; a
  // Push's non-transient refusals are counted in the metrics.
  Next AfterPullFailure(const Status& failure, RetryLoop* loop);
  Next AfterPushFailure(const Status& failure, RetryLoop* loop);

  // At start: the master's module buffers once trainers have sent any, so
  // a replacement trainer starts from the job's statistics.
  void AdoptMasterBuffers();
  // Sends the module's buffers now (best effort; a task's end), and
  // whether any push was made since they were last sent.
  void SendBuffers();
  bool buffers_behind() const { return pushes_since_buffers_ > 0; }

  // The task in hand's pushes, by the master run that applied them (0 for
  // a master without runs) and the version that holds each (in sync mode
  // the step's next). BeginTask forgets the last task's.
  void BeginTask() { task_pushes_.clear(); }
  // An answer came from another master run than Connect()'s (of any shard).
  bool run_changed() const;
  // After run_changed(): connects again to learn what the new run resumed
  // from. The positions of the task's pushes applied after that point
  // (lost: to train again) go to *lost in push order, and are forgotten;
  // the old run's others are in the checkpoint it resumed from.
  Status TakeLost(RetryLoop* loop, std::vector<SampleRange>* lost);
  // What the task's completion reports: per master run the newest version
  // its pushes reached (those in a checkpoint need no word).
  void AddReached(proto::CompleteTaskRequest* report) const;

  // Moving averages of a pull's and a push's duration (the grace decision):
  // of all shards, as they run at once.
  double pull_seconds() const { return pull_seconds_.seconds(); }
  double push_seconds() const { return push_seconds_.seconds(); }

 private:
  // One master (shard) and what this worker knows of it.
  struct Shard {
    explicit Shard(MasterLink l) : link(std::move(l)) {}
    MasterLink link;
    size_t begin = 0, end = 0;      // its part of θ
    int64_t known_version = -1;     // what parameters() holds; -1: nothing trusted
    uint64_t base_version = 0;      // the version the next gradient is computed on
    uint64_t run_id = 0;            // the run that answered Connect
    bool run_changed = false;
    bool push_pull = true;
    bool pulled_with_push = false;  // its part of parameters() holds a PushPull's θ
    MasterClient::PullResult pulled;  // that pull, accepted once the push is booked
    bool has_batch = false;         // applied (or accumulated) the batch in hand
    proto::PushResponse reply;      // its answer to the last push
    Status status;                  // of its last call

    size_t size() const { return end - begin; }
    void NoteRun(uint64_t incarnation) {
      if (incarnation != 0 && incarnation != run_id) run_changed = true;
    }
  };

  // Runs fn(shard) for every shard, at once when there are several.
  void ForEachShard(const std::function<void(Shard&)>& fn);
  Status ConnectShard(Shard* shard, const std::string& address, RetryLoop* loop);
  Status CheckShardRanges() const;
  // The first failure of the shards' last calls, OK when none failed.
  Status FirstFailure() const;
  Status PullNow();
  // One shard's part of a pull or push, on the shard's thread: touches
  // only the shard and its slice of the model's buffers.
  void PullShard(Shard* shard, uint32_t worker, float* parameters);
  void AcceptPulled(Shard* shard, const MasterClient::PullResult& r);
  const float* Gradient();
  void SendGradient(Shard* shard, uint32_t worker, const float* gradient, float* parameters,
                    float loss);
  // The shards whose last call failed: logged (rate-limited) by their links.
  void NoteFailures(const char* verb);
  // The shards' answers to one push as one: the lowest version, the
  // largest staleness, the Gap averaged over θ.
  proto::PushResponse CombinedReply() const;
  uint64_t LowestVersion() const;
  void WaitForNextStep(Shard* shard, uint64_t pushed_on);
  uint64_t NextSeed() { return ++seed_counter_ * 7927u; }
  // kAgain after the loop's wait, kGiveUp when it would not wait.
  static Next AfterWaiting(RetryLoop* loop) { return loop->Wait() ? Next::kAgain : Next::kGiveUp; }

  const TrainingJob& job_;
  MasterLink::Connector connect_;
  std::vector<Shard> shards_;
  std::unique_ptr<ShardCalls> calls_;  // one thread per shard past the first
  std::vector<std::string> addresses_;
  CoordinatorSession* const coordinator_;
  StopFlag* const stop_;
  WorkerMetrics* const metrics_;
  const int max_recomputes_;
  int batch_refusals_ = 0;  // the batch in hand's, since BeginBatch()
  Model* model_ = nullptr;
  size_t p_ = 0;
  uint64_t seed_counter_ = 0;

  // A push of the task in hand: its positions and where it landed, by
  // shard. Incarnation 0: in a checkpoint.
  struct TaskPush {
    SampleRange positions;
    uint32_t shard = 0;
    uint64_t incarnation = 0;
    uint64_t version = 0;
  };
  std::vector<TaskPush> task_pushes_;
  SampleRange batch_in_hand_{0, 0};  // the positions the shards' has_batch refer to

  bool sync_ = false;
  bool echo_ = false;
  proto::WireType echo_type_ = proto::FLOAT32;
  std::vector<bf16_t> echo_bf16_;  // parameters() as bf16, refreshed per pull
  bool dana_slim_ = false;
  float momentum_ = 0, weight_decay_ = 0;
  std::vector<float> velocity_, next_velocity_, u_;

  MovingDuration pull_seconds_, push_seconds_;
  bool not_member_logged_ = false;
  uint32_t pushes_since_buffers_ = 0;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_WORKER_MASTER_SESSION_H_
