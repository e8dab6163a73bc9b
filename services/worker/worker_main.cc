// gaptrain-worker: a trainer or the evaluator of one TrainingJob. Wiring
// only: flags, the job file, SIGTERM/SIGINT (SignalWatcher), and
// RunWorkerProcess. Exit status: 0 when the job finished or the worker was
// preempted, 1 on an error it cannot recover from, 2 for bad flags or a
// bad job file.

#include <spdlog/cfg/env.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <string>
#include <vector>

#include "services/api/training_job.h"
#include "services/base/heap_policy.h"
#include "services/worker/signal_watcher.h"
#include "services/worker/stop_flag.h"
#include "services/worker/worker_options.h"
#include "services/worker/worker_process.h"

int main(int argc, char** argv) {
  spdlog::cfg::load_env_levels();  // $SPDLOG_LEVEL, e.g. debug
  gaptrain::UseTrainingHeapPolicy();
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && (args[0] == "-h" || args[0] == "--help")) {
    std::fputs(gaptrain::WorkerUsage(), stdout);
    return 0;
  }
  gaptrain::WorkerOptions options;
  gaptrain::Status s = gaptrain::ParseWorkerFlags(args, &options);
  if (!s.ok()) {
    std::fprintf(stderr, "gaptrain-worker: %s\n%s", s.message().c_str(), gaptrain::WorkerUsage());
    return 2;
  }
  gaptrain::TrainingJob job;
  s = gaptrain::LoadTrainingJob(options.job_file, &job);
  if (!s.ok()) {
    std::fprintf(stderr, "gaptrain-worker: %s\n", s.message().c_str());
    return 2;
  }

  gaptrain::StopFlag stop;
  gaptrain::SignalWatcher signals(&stop, options.grace_seconds);  // before any other thread
  s = gaptrain::RunWorkerProcess(options, job, &stop);
  signals.Done();
  if (!s.ok()) {
    spdlog::critical("{}", s.ToString());
    return 1;
  }
  return 0;
}
