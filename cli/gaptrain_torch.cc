// gaptrain-torch: the gaptrain commands that run LibTorch (simulate,
// export). `gaptrain` hands them over with exec; they live apart so that
// run, status and crd start in milliseconds: loading LibTorch costs every
// process about 0.8 s of CPU before main (relocations and operator
// registrations), and `gaptrain run` would pay it on the job's critical
// path, before the master is even started. Wires subcommands only.

#include <cstdio>
#include <string>
#include <vector>

#include "cli/export/export_command.h"
#include "cli/simulator/simulate_command.h"
#include "services/base/heap_policy.h"

int main(int argc, char** argv) {
  gaptrain::UseTrainingHeapPolicy();
  const std::string command = argc >= 2 ? argv[1] : "";
  std::vector<std::string> args(argv + (argc >= 2 ? 2 : argc), argv + argc);
  if (command == "simulate") return gaptrain::SimulateCommand(args);
  if (command == "export") return gaptrain::ExportCommand(args);
  const char* usage =
      "usage: gaptrain-torch simulate|export [ARGS]\n"
      "(started by `gaptrain simulate` and `gaptrain export`)\n";
  if (command == "--help" || command == "-h" || command == "help") {
    std::fputs(usage, stdout);
    return 0;
  }
  std::fputs(usage, stderr);
  return 2;
}
