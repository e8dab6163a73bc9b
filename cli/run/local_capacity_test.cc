#include "cli/run/local_capacity.h"

#include <gtest/gtest.h>

#include <string>

namespace gaptrain {
namespace {

constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t kMnistBytes = 55ull << 20;

TEST(LocalCapacityTest, TrainersPerCpu) {
  const MachineCapacity two_cpus{2, 64 * kGiB};
  EXPECT_TRUE(CheckLocalCapacity(16, kMnistBytes, two_cpus).ok());
  const Status s = CheckLocalCapacity(17, kMnistBytes, two_cpus);
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "spec.workers.replicas: 17 trainers are too many for this machine's 2 CPUs: gaptrain "
            "run starts each as a process and allows 8 per CPU (16 here); run fewer, or run the "
            "job on a cluster (kubectl apply -f)");
}

// An autoscaled job is checked at its maxReplicas, and the error says so.
TEST(LocalCapacityTest, NamesTheFieldThatSetTheTrainers) {
  const Status s = CheckLocalCapacity(17, kMnistBytes, {2, 64 * kGiB}, "spec.workers.maxReplicas");
  EXPECT_EQ(s.message().rfind("spec.workers.maxReplicas: 17 trainers are too many", 0), 0u)
      << s.message();
}

TEST(LocalCapacityTest, Memory) {
  // 4 trainers + the evaluator at 255 MiB each, and 256 MiB: 1531 MiB.
  const uint64_t needed = 5 * ((200ull << 20) + kMnistBytes) + (256ull << 20);
  EXPECT_TRUE(CheckLocalCapacity(4, kMnistBytes, {64, needed}).ok());
  const Status s = CheckLocalCapacity(4, kMnistBytes, {64, needed - 1});
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "spec.workers.replicas: 4 trainers and the evaluator need about 1.5 GiB of memory "
            "(200 MiB of runtime and 55 MiB of dataset each, and 256 MiB for the master and "
            "coordinator), more than the 1.5 GiB this machine has available; run fewer, or run "
            "the job on a cluster (kubectl apply -f)");
  // Unknown memory is not a reason to refuse.
  EXPECT_TRUE(CheckLocalCapacity(4, kMnistBytes, {64, 0}).ok());
}

TEST(LocalCapacityTest, ThisMachineIsRead) {
  const MachineCapacity m = ThisMachine();
  EXPECT_GE(m.cpus, 1);
  EXPECT_GT(m.available_bytes, 64ull << 20);  // /proc/meminfo or the cgroup
}

}  // namespace
}  // namespace gaptrain
