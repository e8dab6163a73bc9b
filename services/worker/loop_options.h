// LoopOptions: what the trainer's and the evaluator's loops are both
// started with. Trainer::Options and EvaluationLoop::Options extend it
// with their own, so worker_process fills the shared part once.

#ifndef GAPTRAIN_SERVICES_WORKER_LOOP_OPTIONS_H_
#define GAPTRAIN_SERVICES_WORKER_LOOP_OPTIONS_H_

#include <cstdint>
#include <string>

#include "services/worker/retry.h"

namespace gaptrain {

struct LoopOptions {
  RetryPolicy retry;          // master calls (the session has its own)
  uint64_t seed = 1;          // backoff jitter
  double grace_seconds = 20;  // after a preemption, until the worker has left
  // Where the model computes: "cpu" or "cuda" (ChooseDevice's choice);
  // a model that cannot run there stays on the CPU (PlaceJobModel).
  std::string device = "cpu";
  // Tests: the GPU's mirrored mode on the CPU (model.h).
  bool mirror_on_cpu_for_testing = false;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_WORKER_LOOP_OPTIONS_H_
