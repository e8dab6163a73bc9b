// AvailableCpus: how many CPUs this process may keep busy, for sizing its
// thread pools (a worker's compute threads, a master's update helpers).
// On Kubernetes a container's CPU limit is its cgroup quota; one with only
// a request has no quota, so the operator also hands the request over
// through the downward API (kCpuRequestEnv), lest every trainer on a node
// size its pool by the node's CPUs (measured: 8x slower with four trainers
// on 2 cores).

#ifndef GAPTRAIN_SERVICES_BASE_AVAILABLE_CPUS_H_
#define GAPTRAIN_SERVICES_BASE_AVAILABLE_CPUS_H_

#include <string>

namespace gaptrain {

// The container's CPU request in millicores ("500"), as the operator sets
// it in every job container (resourceFieldRef requests.cpu, divisor 1m);
// "0" or unset when there is none.
inline constexpr char kCpuRequestEnv[] = "GAPTRAIN_CPU_REQUEST_MILLICORES";

// The cgroup CPU quota (a container's limit, rounded up) when there is
// one, else the CPU request in kCpuRequestEnv (rounded up), else the
// affinity mask's count; never more than the affinity mask allows, never
// less than 1.
int AvailableCpus();

// AvailableCpus' choice from what it read: `quota_cpus` (0: no quota), the
// request's text (millicores; "" or anything but a positive integer: no
// request) and the affinity mask's count.
int ChooseCpus(int quota_cpus, const std::string& request_millicores, int affinity_cpus);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_BASE_AVAILABLE_CPUS_H_
