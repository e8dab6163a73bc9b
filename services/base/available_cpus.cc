#include "services/base/available_cpus.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace gaptrain {
namespace {

// The first line of a small file, or "" when it cannot be read.
std::string ReadLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  return line;
}

// CPUs allowed by a quota of `quota` microseconds per `period`, rounded up;
// 0 when there is no quota.
int QuotaCpus(double quota, double period) {
  if (quota <= 0 || period <= 0) return 0;
  return std::max(1, static_cast<int>(std::ceil(quota / period - 1e-9)));
}

// cgroup v2: cpu.max holds "max 100000" (no limit) or "200000 100000".
// Every level from the process's own cgroup up to the mount root may limit
// it; the smallest quota wins. In a container with its own cgroup namespace
// /proc/self/cgroup reads "0::/" and only the root file is looked at.
int CgroupV2Cpus() {
  std::string cgroup_path = "/";
  std::ifstream cgroup("/proc/self/cgroup");
  std::string line;
  while (std::getline(cgroup, line)) {
    if (line.rfind("0::", 0) == 0) cgroup_path = line.substr(3);
  }
  if (cgroup_path.empty() || cgroup_path[0] != '/') cgroup_path = "/" + cgroup_path;
  int best = 0;
  while (true) {
    const std::string dir = cgroup_path == "/" ? "/sys/fs/cgroup" : "/sys/fs/cgroup" + cgroup_path;
    std::istringstream fields(ReadLine(dir + "/cpu.max"));
    std::string quota;
    double period = 0;
    if (fields >> quota >> period && quota != "max") {
      int cpus = 0;
      try {
        cpus = QuotaCpus(std::stod(quota), period);
      } catch (...) {
      }
      if (cpus > 0 && (best == 0 || cpus < best)) best = cpus;
    }
    if (cgroup_path == "/") break;
    const size_t slash = cgroup_path.find_last_of('/');
    cgroup_path = slash == 0 ? "/" : cgroup_path.substr(0, slash);
  }
  return best;
}

// cgroup v1: cpu.cfs_quota_us (-1 when unlimited) and cpu.cfs_period_us.
int CgroupV1Cpus() {
  for (const char* dir : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"}) {
    const std::string quota = ReadLine(std::string(dir) + "/cpu.cfs_quota_us");
    const std::string period = ReadLine(std::string(dir) + "/cpu.cfs_period_us");
    if (quota.empty() || period.empty()) continue;
    try {
      return QuotaCpus(std::stod(quota), std::stod(period));
    } catch (...) {
      continue;
    }
  }
  return 0;
}

int AffinityCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

}  // namespace

int ChooseCpus(int quota_cpus, const std::string& request_millicores, int affinity_cpus) {
  const int affinity = std::max(1, affinity_cpus);
  if (quota_cpus > 0) return std::min(quota_cpus, affinity);
  long long millicores = 0;
  const bool digits = !request_millicores.empty() && request_millicores.size() <= 9 &&
                      request_millicores.find_first_not_of("0123456789") == std::string::npos;
  if (digits) millicores = std::stoll(request_millicores);
  if (millicores > 0) {
    return std::min(affinity, static_cast<int>((millicores + 999) / 1000));
  }
  return affinity;
}

int AvailableCpus() {
  int quota = CgroupV2Cpus();
  if (quota == 0) quota = CgroupV1Cpus();
  const char* request = std::getenv(kCpuRequestEnv);
  return ChooseCpus(quota, request != nullptr ? request : "", AffinityCpus());
}

}  // namespace gaptrain
