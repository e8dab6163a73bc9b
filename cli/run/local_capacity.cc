#include "cli/run/local_capacity.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "services/base/available_cpus.h"

namespace gaptrain {
namespace {

constexpr char kElsewhere[] = "; run fewer, or run the job on a cluster (kubectl apply -f)";

std::string Size(uint64_t bytes) {
  char text[32];
  if (bytes >= (1ull << 30)) {
    std::snprintf(text, sizeof text, "%.1f GiB", bytes / double(1ull << 30));
  } else {
    std::snprintf(text, sizeof text, "%.0f MiB", bytes / double(1ull << 20));
  }
  return text;
}

// MemAvailable in bytes; 0 when unknown.
uint64_t MemAvailable() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib << 10;
  }
  return 0;
}

// memory.max - memory.current of this process's cgroup (v2); 0 when there
// is no limit or it cannot be read.
uint64_t CgroupRoom() {
  std::ifstream cgroup("/proc/self/cgroup");
  std::string line, path;
  while (std::getline(cgroup, line)) {
    if (line.rfind("0::", 0) == 0) path = line.substr(3);
  }
  if (path.empty()) return 0;
  const std::string dir = "/sys/fs/cgroup" + (path == "/" ? "" : path);
  uint64_t max = 0, current = 0;
  std::ifstream max_file(dir + "/memory.max"), current_file(dir + "/memory.current");
  if (!(max_file >> max) || !(current_file >> current)) return 0;  // "max": no limit
  return max > current ? max - current : 1;
}

}  // namespace

MachineCapacity ThisMachine() {
  MachineCapacity m;
  m.cpus = AvailableCpus();
  m.available_bytes = MemAvailable();
  const uint64_t room = CgroupRoom();
  if (room > 0 && (m.available_bytes == 0 || room < m.available_bytes)) m.available_bytes = room;
  return m;
}

Status CheckLocalCapacity(uint32_t trainers, uint64_t dataset_bytes, const MachineCapacity& machine,
                          const std::string& field) {
  const uint64_t max_trainers = uint64_t{kTrainersPerCpu} * std::max(1, machine.cpus);
  if (trainers > max_trainers) {
    return Status::FailedPrecondition(
        field + ": " + std::to_string(trainers) + " trainers are too many for " +
        "this machine's " + std::to_string(machine.cpus) + " CPUs: gaptrain run starts each " +
        "as a process and allows " + std::to_string(kTrainersPerCpu) + " per CPU (" +
        std::to_string(max_trainers) + " here)" + kElsewhere);
  }
  if (machine.available_bytes == 0) return Status::OK();  // unknown: let it try
  const uint64_t per_worker = kWorkerRuntimeBytes + dataset_bytes;
  const uint64_t needed = (uint64_t{trainers} + 1) * per_worker + kServicesBytes;
  if (needed > machine.available_bytes) {
    return Status::FailedPrecondition(
        field + ": " + std::to_string(trainers) + " trainers and the evaluator need about " +
        Size(needed) + " of memory (" + Size(kWorkerRuntimeBytes) + " of runtime and " +
        Size(dataset_bytes) + " of dataset each, and " + Size(kServicesBytes) +
        " for the master and coordinator), more than the " + Size(machine.available_bytes) +
        " this machine has available" + kElsewhere);
  }
  return Status::OK();
}

}  // namespace gaptrain
