// The size of the machine's last-level cache, for benchmarks that say
// whether the bytes they move fit in it.
//
// The kernel's description (/sys/devices/system/cpu/cpu0/cache) is read
// first: glibc's sysconf(_SC_LEVEL3_CACHE_SIZE) derives the size from
// CPUID, which a hypervisor may fill in differently (an AMD EPYC VM with a
// 32 MiB L3, as lscpu and the kernel say, made sysconf report 320 MiB).

#ifndef GAPTRAIN_BENCH_CACHE_SIZE_H_
#define GAPTRAIN_BENCH_CACHE_SIZE_H_

#include <string>

namespace gaptrain {

struct CacheSize {
  long bytes = 0;      // 0: unknown
  std::string source;  // where the size came from, for the benchmark's output
};

// The largest-level data or unified cache listed under `cpu_dir`/cache
// (index*/level, type and size, as in sysfs: "32768K"). bytes 0 when the
// directory has none that parse.
CacheSize LastLevelCacheFromSysfs(const std::string& cpu_dir);

// LastLevelCacheFromSysfs for CPU 0, else glibc's sysconf (L3, then L2).
CacheSize LastLevelCache();

// How `bytes` of working set compare with a cache of `cache_bytes`: "in
// cache" up to half of it (the rest of the process and other cores use it
// too), "out of cache" from twice it, "about the cache's size" between,
// "cache size unknown" when cache_bytes is 0.
const char* CacheFit(double bytes, long cache_bytes);

}  // namespace gaptrain

#endif  // GAPTRAIN_BENCH_CACHE_SIZE_H_
