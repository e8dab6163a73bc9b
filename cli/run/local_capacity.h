// Whether this machine can hold a job's processes, checked by `gaptrain
// run` before it starts any. Each trainer and the evaluator is a process
// with its own LibTorch runtime and its own copy of the dataset; the master
// and coordinator come on top. Refusing up front, with the field to change,
// beats a machine that swaps, or trainers that miss their leases for want
// of a CPU.
//
// The memory figures are measured: a trainer on MNIST with LeNet-5 peaks at
// about 255 MB resident, 55 MB of it the dataset; the master at about
// 210 MB and the coordinator at about 21 MB.

#ifndef GAPTRAIN_CLI_RUN_LOCAL_CAPACITY_H_
#define GAPTRAIN_CLI_RUN_LOCAL_CAPACITY_H_

#include <cstdint>
#include <string>

#include "services/base/status.h"

namespace gaptrain {

struct MachineCapacity {
  int cpus = 1;                   // AvailableCpus()
  uint64_t available_bytes = 0;   // memory that can be had without swapping
};

// More trainers than this per CPU mostly wait for one.
constexpr uint32_t kTrainersPerCpu = 8;
// A worker process without its dataset, and the master with the
// coordinator.
constexpr uint64_t kWorkerRuntimeBytes = 200ull << 20;
constexpr uint64_t kServicesBytes = 256ull << 20;

// This machine: AvailableCpus(), and MemAvailable from /proc/meminfo, or
// the room left under this process's cgroup v2 memory.max when smaller.
MachineCapacity ThisMachine();

// OK when `trainers` trainers and the evaluator, each holding
// `dataset_bytes`, fit on `machine` with the master and coordinator; else
// FAILED_PRECONDITION naming `field` (the one that set `trainers`) and what
// it exceeds.
Status CheckLocalCapacity(uint32_t trainers, uint64_t dataset_bytes, const MachineCapacity& machine,
                          const std::string& field = "spec.workers.replicas");

}  // namespace gaptrain

#endif  // GAPTRAIN_CLI_RUN_LOCAL_CAPACITY_H_
