// ReadFileInflatedCached: ReadFileMaybeGzip for processes on one machine
// that read the same gzip'd dataset. The first inflates it and leaves the
// inflated bytes in a cache directory; the others read that copy: one pass
// over the page cache instead of inflating tens of MB each (MNIST's train
// images: 0.3-0.5 s of CPU per process, five processes at a job's start and
// one more at every worker restart).
//
// What callers may rely on:
//   - The bytes are exactly those ReadFileMaybeGzip returns, whatever the
//     cache holds: a copy is used only when its size and CRC-32 equal the
//     gzip trailer's (ISIZE and CRC32, RFC 1952), so a changed source, a
//     truncated or corrupted copy, or a copy of another file is never
//     served; such a copy is replaced.
//   - Copies are named by the trailer (`NAME.<crc>-<size>`), so files with
//     the same bytes share one copy, across jobs and runs.
//   - A copy appears whole or not at all (WriteFileAtomically, under the
//     lock). Processes that miss at once inflate once: the others wait on
//     the lock file, then read the copy.
//   - The cache only ever costs speed: a directory that cannot be made or
//     written, a lock that cannot be taken, a multi-member gzip file (its
//     trailer covers its last member only) or a plain file all fall back
//     to reading the source, and *outcome says why.
//   - Nothing is ever deleted but a copy being replaced; the directory may
//     be removed at any time by anyone.
// Thread-safe: concurrent calls, in one process or several, are fine.

#ifndef GAPTRAIN_SERVICES_LEARN_INFLATED_CACHE_H_
#define GAPTRAIN_SERVICES_LEARN_INFLATED_CACHE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "services/base/status.h"

namespace gaptrain {

// InflatedCacheOutcome::reason for a plain file: nothing to cache, which
// is no problem of the cache's.
inline constexpr char kNotGzipReason[] = "not a gzip file";

struct InflatedCacheOutcome {
  enum class Kind {
    kHit,       // read from the cache's copy
    kFilled,    // inflated from the source; the copy is now in the cache
    kBypassed,  // read from the source only; `reason` says why
  };
  Kind kind = Kind::kBypassed;
  std::string copy_path;  // the copy used or written (kHit, kFilled)
  std::string reason;     // kBypassed: why not (a plain file, a write error, ...)
};

// Reads `path` (plain or gzip) into *contents, using and filling the cache
// in `cache_dir` (created if missing) for a gzip file. Errors are those of
// ReadFileMaybeGzip on `path`; the cache's own problems are never errors.
Status ReadFileInflatedCached(const std::string& path, const std::string& cache_dir,
                              std::vector<uint8_t>* contents, InflatedCacheOutcome* outcome);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_LEARN_INFLATED_CACHE_H_
