// Trainer: the loop of a training worker (docs/worker.md). It registers
// with the coordinator, takes data tasks, and for every batch of a task
// pulls the parameters straight into the model's flat buffer (no payload
// when the version did not change), computes the gradient, and pushes it;
// what a push carries and what the master's answers mean is the
// MasterSession's business (master_session.h), the batch's data, compute,
// retries and grace period the Trainer's. The coordinator session
// heartbeats with the progress meanwhile. At the end of a task
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
#include "services/worker/coordinator_session.h"
#include "services/worker/loop_options.h"
#include "services/worker/master_link.h"
#include "services/worker/master_session.h"
#include "services/worker/moving_duration.h"
#include "services/worker/retry.h"
#include "services/worker/stop_flag.h"
#include "services/worker/worker_metrics.h"

namespace gaptrain {

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

  Status Setup();
  Status Loop();
  Status RunTask(const proto::DataTask& task);
  Status TrainBatch(SampleRange positions, uint64_t generation, BatchOutcome* outcome,
                    float* loss);
  // The master session saw another master run: the positions of the task
  // whose updates it lost go to the end of `todo` (*lost: how many).
  Status OnMasterRestart(std::deque<SampleRange>* todo, uint32_t* lost);
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
  MasterSession master_;
  StopFlag* const stop_;
  WorkerMetrics* const metrics_;
  const Options options_;
  uint64_t seed_counter_ = 0;

  std::unique_ptr<Model> model_;
  std::string device_;
  std::unique_ptr<BatchLoader> loader_;
  std::vector<float> images_;
  std::vector<int64_t> labels_;
  uint64_t shuffle_seed_ = 0;
  uint32_t order_epoch_ = UINT32_MAX;
  std::vector<uint32_t> order_;
  // The task in hand (task_id 0: none) and how many of its samples were
  // pushed: what leaving hands back.
  proto::DataTask task_;
  uint32_t task_done_ = 0;

  MovingDuration compute_seconds_;  // for the grace decision

  uint64_t batches_ = 0, samples_ = 0, tasks_ = 0, skipped_ = 0, retrained_ = 0;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_WORKER_TRAINER_H_
