// gaptrain-operator: reconciles TrainingJobs on a Kubernetes cluster.
// Wiring only: flags, OperatorProcess, and the signals: SIGTERM or SIGINT
// stops it cleanly (exit 0); losing leadership, or failing to start,
// exits 1; bad flags exit 2.

#include <signal.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "operator/operator_options.h"
#include "operator/operator_process.h"
#include "services/base/termination_signal.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  for (const std::string& arg : args) {
    if (arg == "-h" || arg == "--help") {
      std::fputs(gaptrain::OperatorUsage().c_str(), stdout);
      return 0;
    }
  }
  std::map<std::string, std::string> env;
  for (const char* name : {"POD_NAME", "POD_NAMESPACE", "HOSTNAME"}) {
    if (const char* value = std::getenv(name)) env[name] = value;
  }
  gaptrain::OperatorOptions options;
  gaptrain::Status s = gaptrain::ParseOperatorFlags(args, env, &options);
  if (!s.ok()) {
    std::fprintf(stderr, "gaptrain-operator: %s\n%s", s.message().c_str(),
                 gaptrain::OperatorUsage().c_str());
    return 2;
  }

  // Before any thread starts; see termination_signal.h.
  if (gaptrain::Status t = gaptrain::TerminationSignal::Install(); !t.ok()) {
    std::fprintf(stderr, "gaptrain-operator: %s\n", t.ToString().c_str());
    return 1;
  }
  std::unique_ptr<gaptrain::OperatorProcess> process;
  s = gaptrain::OperatorProcess::Start(options, &process);
  if (!s.ok()) {
    spdlog::critical("cannot start: {}", s.ToString());
    return 1;
  }
  for (;;) {
    const int signal = gaptrain::TerminationSignal::WaitFor(250);
    if (signal != 0) {
      spdlog::info("{}: finishing the reconciles in flight, releasing the Lease",
                   signal == SIGTERM ? "SIGTERM" : "SIGINT");
      process->Shutdown();
      spdlog::info("stopped");
      return 0;
    }
    gaptrain::Status why;
    if (process->WaitForFailure(std::chrono::milliseconds(0), &why)) {
      spdlog::critical("{}; exiting", why.message());
      process->Shutdown();
      return 1;
    }
  }
}
