// What /proc says of another process, for benchmarks that measure the
// processes they start (the control plane, the operator): its CPU time
// and its resident memory; and of the whole machine, how busy its CPUs
// were (to say whether the machine, rather than one process, binds).
//
// What callers may rely on: each reads /proc afresh each call and returns
// 0 when the process is gone or the field cannot be read; none throws.

#ifndef GAPTRAIN_BENCH_PROCESS_STATS_H_
#define GAPTRAIN_BENCH_PROCESS_STATS_H_

#include <sys/types.h>

#include <string>

namespace gaptrain {

// utime + stime of process `pid` in seconds.
double ProcessCpuSeconds(pid_t pid);

// CPU seconds all of the machine's CPUs spent busy (anything but idle and
// waiting for I/O) since boot, from /proc/stat. Busy share of the machine
// over a window: the difference / (window seconds x CPUs).
double MachineBusyCpuSeconds();

// A /proc/PID/status field given in kB ("VmRSS", "VmHWM"), in MB.
double ProcessMemoryMb(pid_t pid, const std::string& field);

}  // namespace gaptrain

#endif  // GAPTRAIN_BENCH_PROCESS_STATS_H_
