// status_examples OUT.h: writes a C++ header holding the coordinator's GET
// /status documents for a few job states, as JobStatusToJson (the
// coordinator's own serializer, status_json.h) writes them, for the tests of
// the operator, which reads /status but may not link the coordinator
// (operator/testing/BUILD generates operator/testing/
// coordinator_status_examples.h with it). A field renamed in the serializer
// changes these documents, and the tests that read them fail.
//
// Each document's values are listed in kExamples below and in the header's
// comment; tests may rely on them.

#include <cctype>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "services/coordinator/coordinator_state.h"
#include "services/coordinator/status_json.h"

namespace gaptrain {
namespace {

// 2026-11-23T06:00:00Z.
constexpr double kT0 = 1795413600;

JobCondition Condition(JobPhase phase, bool status, const std::string& reason,
                       const std::string& message, double at) {
  return JobCondition{JobPhaseName(phase), status ? "True" : "False", reason, message, at};
}

LiveWorkerStatus Worker(WorkerId id, const std::string& host, WorkerRole role, uint64_t task,
                        uint32_t samples_done, bool has_loss, float loss) {
  LiveWorkerStatus w;
  w.record.id = id;
  w.record.host = host;
  w.record.role = role;
  w.record.task_id = task;
  w.record.samples_done = samples_done;
  w.record.has_loss = has_loss;
  w.record.loss = loss;
  w.seconds_since_heartbeat = 1.5;
  return w;
}

// Running mid-job: epoch 2 of 10 with 15000 of 60000 samples done in the
// third (2.25 epochs), master version 4210, 5 live workers of which 4
// trainers (min 2), the evaluator's latest: accuracy 0.97, loss 0.1 and
// top5_accuracy 0.995 at version 4000, against the target top5_accuracy
// >= 0.999. Reason EnoughWorkers, message "4 trainers".
JobStatus Running() {
  JobStatus s;
  s.job_name = "mnist";
  s.phase = JobPhase::kRunning;
  s.condition = Condition(JobPhase::kRunning, true, "EnoughWorkers", "4 trainers", kT0 + 60);
  s.conditions = {Condition(JobPhase::kPending, false, "Created", "", kT0),
                  s.condition};
  s.live_workers = 5;
  s.live_trainers = 4;
  s.min_trainers = 2;
  s.counters.joins = 6;
  s.counters.left_preempted = 1;
  s.counters.tasks_reassigned = 1;
  s.workers = {Worker(1, "mnist-evaluator", WorkerRole::kEvaluator, 0, 0, false, 0),
               Worker(2, "mnist-trainer-0", WorkerRole::kTrainer, 17, 640, true, 0.25f)};
  s.epoch = 2;
  s.epochs = 10;
  s.tasks_total = 30;
  s.tasks_queued = 10;
  s.tasks_in_flight = 4;
  s.tasks_done = 16;
  s.samples_done_in_epoch = 15000;
  s.samples_in_epoch = 60000;
  s.progress = 0.225;
  s.master_version = 4210;
  s.last_accuracy = 0.97;
  s.last_eval_loss = 0.1;
  s.last_eval_version = 4000;
  s.last_eval_metrics = {{"top5_accuracy", 0.995}};
  s.target = "top5_accuracy >= 0.999";
  return s;
}

// Succeeded after 1 epoch: reason EpochsCompleted, message "completed 1
// epochs", finished at 2026-11-23T06:20:00Z (Unix 1795414800; the
// Succeeded condition's lastTransitionTime), master version 938, no live
// worker, accuracy 0.9871 and loss 0.04 at version 938; samples 0 of 60000
// in the epoch after the last (1.0 epochs done).
JobStatus Succeeded() {
  JobStatus s;
  s.job_name = "mnist";
  s.phase = JobPhase::kSucceeded;
  s.condition =
      Condition(JobPhase::kSucceeded, true, "EpochsCompleted", "completed 1 epochs", kT0 + 1200);
  s.conditions = {Condition(JobPhase::kPending, false, "Created", "", kT0),
                  Condition(JobPhase::kRunning, false, "EnoughWorkers", "4 trainers", kT0 + 600),
                  s.condition};
  s.min_trainers = 1;
  s.counters.joins = 5;
  s.counters.left_finished = 5;
  s.epoch = 1;
  s.epochs = 1;
  s.samples_in_epoch = 60000;
  s.progress = 1;
  s.master_version = 938;
  s.last_accuracy = 0.9871;
  s.last_eval_loss = 0.04;
  s.last_eval_version = 938;
  return s;
}

// Pending before any worker: reason Created, epoch 0, master version 0, no
// evaluation yet (accuracy and loss null).
JobStatus Pending() {
  JobStatus s;
  s.job_name = "mnist";
  s.phase = JobPhase::kPending;
  s.condition = Condition(JobPhase::kPending, true, "Created", "waiting for 1 trainer", kT0);
  s.conditions = {s.condition};
  s.min_trainers = 1;
  s.epochs = 4;
  s.samples_in_epoch = 60000;
  return s;
}

// Running as above while trainer 2 (mnist-trainer-0) cannot reach its
// data store: 2 tasks handed back since 2026-11-23T06:05:00Z (Unix
// 1795413900), the last saying "ConnectionRefusedError: [Errno 111]
// store:9000 refused the connection".
JobStatus DataUnavailable() {
  JobStatus s = Running();
  s.counters.tasks_released = 2;
  s.data_unavailable = gaptrain::DataUnavailable{
      kT0 + 300, "ConnectionRefusedError: [Errno 111] store:9000 refused the connection", 2,
      "mnist-trainer-0", 2};
  return s;
}

struct Example {
  const char* name;
  JobStatus (*make)();
};

const Example kExamples[] = {
    {"kRunning", Running},
    {"kSucceeded", Succeeded},
    {"kPending", Pending},
    {"kDataUnavailable", DataUnavailable},
};

// The header's include guard for `path` (its last three components).
std::string Guard(const std::string& path) {
  std::string tail = path;
  for (int slashes = 0, i = static_cast<int>(path.size()) - 1; i >= 0; --i) {
    if (path[i] == '/' && ++slashes == 3) {
      tail = path.substr(i + 1);
      break;
    }
  }
  std::string guard = "GAPTRAIN_";
  for (char c : tail) guard += std::isalnum(static_cast<unsigned char>(c)) ? std::toupper(c) : '_';
  return guard + "_";
}

}  // namespace
}  // namespace gaptrain

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: status_examples OUT.h\n");
    return 2;
  }
  const std::string guard = gaptrain::Guard(argv[1]);
  std::string text =
      "// Generated by //services/coordinator:status_examples "
      "(services/coordinator/status_examples.cc,\n"
      "// which lists each document's values): the coordinator's GET /status as\n"
      "// JobStatusToJson writes it. Do not edit.\n\n"
      "#ifndef " + guard + "\n#define " + guard + "\n\n"
      "namespace gaptrain {\nnamespace coordinator_status_examples {\n\n";
  for (const gaptrain::Example& e : gaptrain::kExamples) {
    text += "inline constexpr char " + std::string(e.name) + "[] = R\"json(" +
            gaptrain::JobStatusToJson(e.make()) + ")json\";\n\n";
  }
  text += "}  // namespace coordinator_status_examples\n}  // namespace gaptrain\n\n#endif  // " +
          guard + "\n";
  std::ofstream out(argv[1]);
  out << text;
  out.close();
  if (!out) {
    std::fprintf(stderr, "status_examples: cannot write %s\n", argv[1]);
    return 1;
  }
  return 0;
}
