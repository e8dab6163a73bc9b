#include "bench/process_stats.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace gaptrain {

double ProcessCpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return 0;
  // Fields after the command (which may hold spaces) start after ") ".
  const size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 > line.size()) return 0;
  std::istringstream fields(line.substr(close + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::strtoull(field.c_str(), nullptr, 10);
    if (i == 15) stime = std::strtoull(field.c_str(), nullptr, 10);
  }
  return static_cast<double>(utime + stime) / sysconf(_SC_CLK_TCK);
}

double MachineBusyCpuSeconds() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  // "cpu  user nice system idle iowait irq softirq steal guest guest_nice";
  // guest time is already counted in user. Steal (the hypervisor running
  // other tenants) counts as busy: this machine could not use it either.
  unsigned long long v[8] = {0};
  if (!(in >> cpu) || cpu != "cpu") return 0;
  for (unsigned long long& x : v) {
    if (!(in >> x)) return 0;
  }
  const unsigned long long busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  return static_cast<double>(busy) / sysconf(_SC_CLK_TCK);
}

double ProcessMemoryMb(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) != 0) continue;
    return std::strtod(line.c_str() + field.size() + 1, nullptr) / 1024;
  }
  return 0;
}

}  // namespace gaptrain
