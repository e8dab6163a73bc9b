// What /proc says of another process, for benchmarks that measure the
// processes they start (the control plane, the operator): its CPU time
// and its resident memory.
//
// What callers may rely on: both read /proc/PID afresh each call and
// return 0 when the process is gone or the field cannot be read; neither
// throws.

#ifndef GAPTRAIN_BENCH_PROCESS_STATS_H_
#define GAPTRAIN_BENCH_PROCESS_STATS_H_

#include <sys/types.h>

#include <string>

namespace gaptrain {

// utime + stime of process `pid` in seconds.
double ProcessCpuSeconds(pid_t pid);

// A /proc/PID/status field given in kB ("VmRSS", "VmHWM"), in MB.
double ProcessMemoryMb(pid_t pid, const std::string& field);

}  // namespace gaptrain

#endif  // GAPTRAIN_BENCH_PROCESS_STATS_H_
