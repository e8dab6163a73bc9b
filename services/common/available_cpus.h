// AvailableCpus: how many CPUs this process may keep busy, for sizing its
// thread pools (a worker's compute threads, a master's update helpers).

#ifndef GAPTRAIN_SERVICES_COMMON_AVAILABLE_CPUS_H_
#define GAPTRAIN_SERVICES_COMMON_AVAILABLE_CPUS_H_

namespace gaptrain {

// The cgroup CPU quota (a container's limit, rounded up) when there is
// one, else the affinity mask's count; never more than the affinity mask
// allows, never less than 1.
int AvailableCpus();

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_COMMON_AVAILABLE_CPUS_H_
