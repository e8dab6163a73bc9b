// EvaluationLoop: the loop of the job's evaluator (one per job;
// docs/worker.md). It registers with the role evaluator, then every
// evalEveryUpdates master updates pulls θ with a read-only observer pull
// (θ itself, not DANA's look-ahead, and no membership needed, so it works
// in sync mode too), evaluates it on the test split, and reports accuracy
// and loss to the coordinator (which ends the job at targetAccuracy) and
// as metrics. When the job ends it evaluates the final version once more
// before leaving, so the job's last reported accuracy is the final
// model's.
//
// Faults are retried as in the Trainer; a preemption abandons an
// evaluation in flight and leaves. Not thread-safe; Run() once.

#ifndef GAPTRAIN_SERVICES_WORKER_EVALUATION_LOOP_H_
#define GAPTRAIN_SERVICES_WORKER_EVALUATION_LOOP_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "services/api/training_job.h"
#include "services/base/status.h"
#include "services/learn/dataset.h"
#include "services/learn/model.h"
#include "services/worker/coordinator_session.h"
#include "services/worker/loop_options.h"
#include "services/worker/master_link.h"
#include "services/worker/master_session.h"
#include "services/worker/retry.h"
#include "services/worker/stop_flag.h"
#include "services/worker/worker_metrics.h"

namespace gaptrain {

class EvaluationLoop {
 public:
  struct Options : LoopOptions {
    explicit Options(LoopOptions loop = LoopOptions()) : LoopOptions(std::move(loop)) {}
    // How often the master's version is checked while waiting.
    std::chrono::milliseconds poll{500};
    int64_t batch_size = 1000;  // evaluation batch
    // After the job ended: time allowed for the final evaluation.
    double final_evaluation_seconds = 60;
  };

  struct Result {
    uint64_t evaluations = 0;
    double accuracy = 0;  // of the last evaluation
    double loss = 0;
    uint64_t version = 0;
  };

  // Everything borrowed must outlive the loop; `metrics` may be null.
  // `test` is the split evaluated.
  EvaluationLoop(const TrainingJob& job, const Dataset& test, CoordinatorSession* session,
                 MasterLink::Connector connect, StopFlag* stop, WorkerMetrics* metrics,
                 Options options);
  ~EvaluationLoop();

  // Evaluates until the job ends or the stop flag is set, then leaves. OK
  // when the job finished or the evaluator was preempted; otherwise the
  // error that stopped it, after Leave(FAILED).
  Status Run();
  const Result& result() const { return result_; }
  // Where the model computed ("cpu", "cuda:0"); "" before Setup.
  const std::string& device() const { return device_; }

 private:
  Status Setup();
  Status Loop();
  // Pulls θ and evaluates it, unless version `latest` was evaluated already.
  Status Evaluate(RetryLoop* loop);
  Status Finish(Status status);
  uint64_t NextSeed() { return options_.seed * 7907u + ++seed_counter_; }

  const TrainingJob& job_;
  const Dataset& test_;
  CoordinatorSession* const session_;
  MasterSession master_;
  StopFlag* const stop_;
  WorkerMetrics* const metrics_;
  const Options options_;
  uint64_t seed_counter_ = 0;

  std::unique_ptr<Model> model_;
  std::string device_;
  bool evaluated_ = false;  // result_ holds an evaluation
  Result result_;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_WORKER_EVALUATION_LOOP_H_
