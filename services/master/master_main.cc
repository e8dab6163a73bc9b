// gaptrain-master: the parameter server of one TrainingJob. Wiring only:
// flags, the job file, MasterProcess, and SIGTERM/SIGINT for a clean stop
// with a final checkpoint.

#include <signal.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <string>
#include <vector>

#include "services/api/training_job.h"
#include "services/base/heap_policy.h"
#include "services/base/termination_signal.h"
#include "services/master/master_options.h"
#include "services/master/master_process.h"

int main(int argc, char** argv) {
  gaptrain::UseTrainingHeapPolicy();
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && (args[0] == "-h" || args[0] == "--help")) {
    std::fputs(gaptrain::MasterUsage().c_str(), stdout);
    return 0;
  }
  gaptrain::MasterOptions options;
  gaptrain::Status s = gaptrain::ParseMasterFlags(args, &options);
  if (!s.ok()) {
    std::fprintf(stderr, "gaptrain-master: %s\n%s", s.message().c_str(),
                 gaptrain::MasterUsage().c_str());
    return 2;
  }
  gaptrain::TrainingJob job;
  s = gaptrain::LoadTrainingJob(options.server.job_file, &job);
  if (!s.ok()) {
    std::fprintf(stderr, "gaptrain-master: %s\n", s.message().c_str());
    return 2;
  }

  // Before the service's threads start; see termination_signal.h.
  if (gaptrain::Status t = gaptrain::TerminationSignal::Install(); !t.ok()) {
    std::fprintf(stderr, "%s\n", t.ToString().c_str());
    return 1;
  }

  std::unique_ptr<gaptrain::MasterProcess> master;
  s = gaptrain::MasterProcess::Start(options, job, &master);
  if (!s.ok()) {
    spdlog::critical("cannot start: {}", s.ToString());
    return 1;
  }
  const int signal = gaptrain::TerminationSignal::Wait();
  spdlog::info("{}: stopping with a final checkpoint", signal == SIGTERM ? "SIGTERM" : "SIGINT");
  master->Shutdown();
  return 0;
}
