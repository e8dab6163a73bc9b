// gaptrain: the command-line entry point. Wires subcommands only.

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cli/run/run_command.h"
#include "cli/run/service_binaries.h"
#include "cli/run/status_command.h"
#include "operator/crd/crd_command.h"
#include "services/base/blas_environment.h"

namespace {

constexpr char kUsage[] =
    "usage: gaptrain COMMAND [ARGS]\n"
    "commands:\n"
    "  run -f JOB.yaml        the whole job on this machine: coordinator, master,\n"
    "                         evaluator and workers as processes; live progress\n"
    "  status [NAME]          a running job's phase, progress, accuracy and workers\n"
    "  simulate -f JOB.yaml   N virtual workers with real gradients and update rules:\n"
    "                         compare rules, worker counts and learning rates\n"
    "  export CHECKPOINT -o OUT.pt\n"
    "                         a checkpoint's parameters as a PyTorch state_dict\n"
    "                         (--run-dir DIR: the run's newest valid checkpoint)\n"
    "  crd [-o FILE]          the TrainingJob CustomResourceDefinition for a cluster\n"
    "Run 'gaptrain COMMAND --help' for a command's options.\n";

// simulate and export run in gaptrain-torch (cli/gaptrain_torch.cc), which
// loads LibTorch; this binary does not.
int ExecTorchCommand(char** argv) {
  std::string path;
  gaptrain::Status s = gaptrain::FindServiceBinary("cli", "gaptrain-torch", &path);
  if (!s.ok()) {
    std::fprintf(stderr, "gaptrain %s: %s\n", argv[1], s.message().c_str());
    return 1;
  }
  argv[0] = const_cast<char*>(path.c_str());
  for (const auto& [name, value] : gaptrain::BlasStartEnvironment()) {
    setenv(name.c_str(), value.c_str(), /*overwrite=*/0);
  }
  execv(path.c_str(), argv);
  std::fprintf(stderr, "gaptrain %s: cannot start %s: %s\n", argv[1], path.c_str(),
               std::strerror(errno));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help") {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  // `bazel run` starts us in the runfiles tree; relative paths in flags and
  // job files mean the user's directory.
  if (const char* dir = std::getenv("BUILD_WORKING_DIRECTORY"); dir != nullptr) {
    if (chdir(dir) != 0) {
      std::fprintf(stderr, "gaptrain: cannot enter %s\n", dir);
      return 1;
    }
  }
  const std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "run") return gaptrain::RunCommand(args);
  if (command == "status") return gaptrain::StatusCommand(args);
  if (command == "simulate" || command == "export") return ExecTorchCommand(argv);
  if (command == "crd") return gaptrain::CrdCommand(args);
  std::fprintf(stderr, "gaptrain: unknown command '%s'\n%s", command.c_str(), kUsage);
  return 2;
}
