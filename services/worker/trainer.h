// Trainer: the loop of a training worker (docs/worker.md). It registers
// with the coordinator, takes data tasks, and for every batch of a task
// pulls the parameters straight into the model's flat buffer (no payload
// when the version did not change), computes the gradient, and pushes it
// with the version it was computed on: plain, with the copy it was
// computed on when the rule wants an echo (gapSource echo), or as
// DANA-Slim's u = g' + γv with the worker's momentum v and g' = g + λx.
// The session heartbeats with the progress meanwhile. At the end of a task
// it completes it and asks for the next, until the job ends or the stop
// flag is set; then it leaves the job.
//
// Faults: every call is retried through a RetryLoop. A master that is down
// or restarting (UNAVAILABLE, timeouts, torn streams) is retried with
// backoff; a worker the master does not know yet (NOT_FOUND: the
// coordinator's membership feed is catching up) waits; a push refused as
// stale, without a matching copy or from the future (FAILED_PRECONDITION,
// OUT_OF_RANGE) pulls again and recomputes the batch, at most
// max_recomputes times; INVALID_ARGUMENT is a bug: logged, batch skipped.
// Nothing the network does crashes the worker.
//
// Master restarts: every pull and push answer names the master run that
// gave it. When a new run answers, the trainer asks it what it resumed
// from (Describe); the batches of the task in hand whose updates the
// restart lost are trained again before the task is completed (their
// positions go to the end of the task), and the completion reports, per
// master run, the newest version the task's pushes reached, so the
// coordinator can retrain a completed task that a later restart loses.
//
// Preemption: when the stop flag is set with kPreempted, the batch in
// flight is finished only if its remaining phases fit in the grace period
// (leaving time to Leave), else abandoned; failed calls are not retried.
// The coordinator puts the task back in the queue when the worker leaves;
// Leave is tried for at most a second (LeaveDeadline), and the log says
// which task went back, or that the coordinator could not be reached and
// the task goes back when the lease runs out.
//
// Not thread-safe; Run() once.

#ifndef GAPTRAIN_SERVICES_WORKER_TRAINER_H_
#define GAPTRAIN_SERVICES_WORKER_TRAINER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "proto/gaptrain.pb.h"
#include "services/api/training_job.h"
#include "services/base/status.h"
#include "services/learn/batch_loader.h"
#include "services/learn/dataset.h"
#include "services/learn/model.h"
#include "services/numeric/bfloat16.h"
#include "services/worker/coordinator_session.h"
#include "services/worker/loop_options.h"
#include "services/worker/master_link.h"
#include "services/worker/retry.h"
#include "services/worker/stop_flag.h"
#include "services/worker/worker_metrics.h"

namespace gaptrain {

// How often a trainer sends its module buffers (BatchNorm's running
// statistics, which move slowly: momentum 0.1 per batch) to the master: a
// few kilobytes every this many pushes, and when a task ends.
inline constexpr uint32_t kPushesPerBufferSend = 16;

class Trainer {
 public:
  struct Options : LoopOptions {
    explicit Options(LoopOptions loop = LoopOptions()) : LoopOptions(std::move(loop)) {}
    int max_recomputes = 3;  // per batch, after stale or not-a-member refusals
  };

  // Everything borrowed must outlive the trainer; `metrics` may be null.
  // `train` is the training split the coordinator's tasks index.
  Trainer(const TrainingJob& job, const Dataset& train, CoordinatorSession* session,
          MasterLink::Connector connect, StopFlag* stop, WorkerMetrics* metrics, Options options);
  ~Trainer();

  // Trains until the job ends or the stop flag is set, then leaves the
  // job. OK when the job finished or the worker was preempted (Leave with
  // FINISHED or PREEMPTED). Otherwise the error that stopped it, after
  // Leave(FAILED): a master holding another model, a task outside this
  // worker's dataset, a refused token, or the retries ran out
  // (Options::retry.max_attempts).
  Status Run();

  // Counters, for tests and the benchmark (read after Run).
  uint64_t batches_pushed() const { return batches_; }
  uint64_t samples_pushed() const { return samples_; }
  uint64_t tasks_completed() const { return tasks_; }
  uint64_t batches_skipped() const { return skipped_; }
  // Positions trained again because a master restart lost their updates.
  uint64_t samples_retrained() const { return retrained_; }
  // Where the model computed ("cpu", "cuda:0"); "" before Setup.
  const std::string& device() const { return device_; }

 private:
  enum class BatchOutcome { kTrained, kSkipped, kStopped, kTaskLost };

  // A batch of the task in hand whose push was applied: its positions and
  // where the push landed. Incarnation 0: known to be in a checkpoint.
  struct PushedBatch {
    SampleRange positions;
    uint64_t incarnation = 0;
    uint64_t version = 0;
  };

  Status Setup();
  Status Loop();
  Status RunTask(const proto::DataTask& task);
  Status TrainBatch(size_t samples, uint64_t generation, BatchOutcome* outcome, float* loss);
  Status PullParameters();
  // The module's buffers (BatchNorm's statistics) to the master, which
  // folds them into the job's (services/master/model_buffers.h); best
  // effort, every kPushesPerBufferSend pushes and when a task ends.
  void SendBuffers();
  // At start: the master's buffers once trainers have sent any, so a
  // replacement trainer starts from the job's statistics.
  void AdoptMasterBuffers();
  // Takes a pull's answer: versions, the master's run, the bf16 echo.
  void AcceptPulled(const MasterClient::PullResult& r);
  // Pushes the gradient computed on base_version_; with PushPull the same
  // call brings the next step's parameters (pulled_with_push_, pulled_),
  // which the caller accepts after booking the push. Falls back
  // to Push for good on a master without PushPull.
  Status SendGradient(const float* gradient, float loss, const void* echo,
                      proto::PushResponse* reply);
  // A call was answered by another master run than run_id_: learns what
  // the new run resumed from, moves the positions of the batches in
  // `pushed` whose updates it lost to the end of `todo` (*lost: how many)
  // and marks the old run's surviving ones as checkpointed.
  Status OnMasterRestart(std::vector<PushedBatch>* pushed, std::deque<SampleRange>* todo,
                         uint32_t* lost);
  // Notes the master run of an answer (0: a master without runs).
  void NoteRun(uint64_t incarnation) {
    if (incarnation != 0 && incarnation != run_id_) run_changed_ = true;
  }
  // What to push: the model's gradient, or DANA-Slim's u.
  const float* Gradient();
  // Sync mode after an ACCUMULATED push: waits until the step completes.
  void WaitForNextStep(uint64_t pushed_on);
  // After a preemption: whether `seconds` more work still ends in time.
  bool FitsInGrace(double seconds) const;
  Status Finish(Status status);
  // The task in hand, for the log when leaving: "task 7 (epoch 0, positions
  // [640, 1280), 320 of 640 samples pushed)", "..., all 640 samples pushed,
  // completion not acknowledged)" when CompleteTask got no answer, or
  // "no task".
  std::string HeldTask() const;
  uint64_t NextSeed() { return options_.seed * 7919u + ++seed_counter_; }

  const TrainingJob& job_;
  const Dataset& train_;
  CoordinatorSession* const session_;
  MasterLink master_;
  StopFlag* const stop_;
  WorkerMetrics* const metrics_;
  const Options options_;
  uint64_t seed_counter_ = 0;

  std::unique_ptr<Model> model_;
  std::string device_;
  std::unique_ptr<BatchLoader> loader_;
  std::vector<float> images_;
  std::vector<int64_t> labels_;
  size_t p_ = 0;
  uint64_t shuffle_seed_ = 0;
  uint32_t order_epoch_ = UINT32_MAX;
  std::vector<uint32_t> order_;
  // The task in hand (task_id 0: none) and how many of its samples were
  // pushed: what leaving hands back.
  proto::DataTask task_;
  uint32_t task_done_ = 0;

  int64_t known_version_ = -1;  // what parameters() holds; -1: nothing trusted
  uint64_t base_version_ = 0;
  uint64_t run_id_ = 0;         // the master run that answered Connect
  bool run_changed_ = false;    // a later answer came from another run
  uint64_t pushed_incarnation_ = 0, pushed_version_ = 0;  // the last applied push

  // Push and the next pull in one call (not in sync mode, where the next
  // step's parameters exist only once every gradient of this one is in).
  bool push_pull_ = true;
  bool pulled_with_push_ = false;  // parameters() holds the newest, pulled with the push
  MasterClient::PullResult pulled_;  // that pull, taken once the push is booked

  // What the master's rule needs from a push.
  bool sync_ = false;
  bool echo_ = false;
  proto::WireType echo_type_ = proto::FLOAT32;
  std::vector<bf16_t> echo_bf16_;  // parameters() as bf16, refreshed per pull
  bool dana_slim_ = false;
  float momentum_ = 0;
  float weight_decay_ = 0;
  std::vector<float> velocity_, next_velocity_, u_;

  // Moving averages of the phases, for the grace decision.
  double pull_seconds_ = 0, compute_seconds_ = 0, push_seconds_ = 0;
  bool not_member_logged_ = false;

  uint64_t batches_ = 0, samples_ = 0, tasks_ = 0, skipped_ = 0, retrained_ = 0;
  uint32_t pushes_since_buffers_ = 0;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_WORKER_TRAINER_H_
