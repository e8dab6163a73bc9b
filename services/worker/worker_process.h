// RunWorkerProcess: gaptrain-worker once its flags and job are parsed. It
// wires the pieces: compute threads and device; the dataset split the role
// needs (train for trainers, test for the evaluator), read once; /metrics
// and /healthz over HTTP; channels to the coordinator and to the master it
// names; the CoordinatorSession; and the Trainer or EvaluationLoop, run on
// the calling thread until the job ends or `stop` is set.
//
// Returns OK when the job finished or the worker was preempted (exit 0);
// otherwise the error, which the caller reports (exit 1). Nothing throws
// across it.

#ifndef GAPTRAIN_SERVICES_WORKER_WORKER_PROCESS_H_
#define GAPTRAIN_SERVICES_WORKER_WORKER_PROCESS_H_

#include "services/api/training_job.h"
#include "services/base/status.h"
#include "services/worker/stop_flag.h"
#include "services/worker/worker_options.h"

namespace gaptrain {

Status RunWorkerProcess(const WorkerOptions& options, const TrainingJob& job, StopFlag* stop);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_WORKER_WORKER_PROCESS_H_
