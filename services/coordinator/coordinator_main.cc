// gaptrain-coordinator: the control plane of one TrainingJob. Wiring only:
// flags, the job file, CoordinatorProcess, and SIGTERM/SIGINT for a clean
// stop that persists the state.

#include <signal.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <string>
#include <vector>

#include "services/api/training_job.h"
#include "services/base/termination_signal.h"
#include "services/coordinator/coordinator_options.h"
#include "services/coordinator/coordinator_process.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && (args[0] == "-h" || args[0] == "--help")) {
    std::fputs(gaptrain::CoordinatorUsage().c_str(), stdout);
    return 0;
  }
  gaptrain::CoordinatorOptions options;
  gaptrain::Status s = gaptrain::ParseCoordinatorFlags(args, &options);
  if (!s.ok()) {
    std::fprintf(stderr, "gaptrain-coordinator: %s\n%s", s.message().c_str(),
                 gaptrain::CoordinatorUsage().c_str());
    return 2;
  }
  gaptrain::TrainingJob job;
  s = gaptrain::LoadTrainingJob(options.server.job_file, &job);
  if (!s.ok()) {
    std::fprintf(stderr, "gaptrain-coordinator: %s\n", s.message().c_str());
    return 2;
  }

  // Before the service's threads start; see termination_signal.h.
  if (gaptrain::Status t = gaptrain::TerminationSignal::Install(); !t.ok()) {
    std::fprintf(stderr, "%s\n", t.ToString().c_str());
    return 1;
  }

  std::unique_ptr<gaptrain::CoordinatorProcess> coordinator;
  s = gaptrain::CoordinatorProcess::Start(options, job, &coordinator);
  if (!s.ok()) {
    spdlog::critical("cannot start: {}", s.ToString());
    return 1;
  }
  const int signal = gaptrain::TerminationSignal::Wait();
  spdlog::info("{}: stopping; the state is written", signal == SIGTERM ? "SIGTERM" : "SIGINT");
  coordinator->Shutdown();
  return 0;
}
