// Replacing a file so that a reader, or the file system after a crash, sees
// either its old content or the whole new content, never a part of it: the
// bytes go to a temp file beside it, which is fsync'd and renamed over the
// destination, then the directory is fsync'd so the rename itself is durable.
// Checkpoints, the coordinator's state file, ports files and the run
// directory's files are written this way.
//
// What callers may rely on:
//   - The temp file is `path` + kAtomicFileTempSuffix, in the same
//     directory (rename does not cross file systems). Only a crash leaves
//     it behind; the next write of `path` truncates and reuses it.
//   - On error the temp file is removed and `path` is untouched, except
//     when only the final directory fsync fails: `path` then already holds
//     the new content.
//   - Errors name the file and the OS error, coded as OsError does
//     (services/base/os_error.h): a missing directory NOT_FOUND, ENOSPC
//     RESOURCE_EXHAUSTED, EACCES PERMISSION_DENIED, others UNAVAILABLE.
//   - The new file has mode 0644 less the umask, whatever the old one had.
// One writer per path at a time: two would share the temp file.

#ifndef GAPTRAIN_SERVICES_BASE_ATOMIC_FILE_H_
#define GAPTRAIN_SERVICES_BASE_ATOMIC_FILE_H_

#include <cstddef>
#include <string>

#include "services/base/status.h"

namespace gaptrain {

inline constexpr char kAtomicFileTempSuffix[] = ".tmp";

// Writes `size` bytes to `path`, replacing it atomically.
Status WriteFileAtomically(const std::string& path, const void* data, size_t size);

// The same protocol for content that is not in one block of memory: the
// checkpoint writer streams a model's buffers through it without copying
// them. Open(), Append() any number of times, Commit(). Destroyed without a
// successful Commit(), it removes the temp file and leaves `path` as it was.
// Not thread-safe.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Creates (or truncates) the temp file.
  Status Open();
  // Writes all n bytes to the temp file.
  Status Append(const void* data, size_t n);
  // fsync, close, rename over `path`, fsync the directory.
  Status Commit();

 private:
  std::string path_;
  std::string temp_;
  int fd_ = -1;
  bool created_ = false;
  bool committed_ = false;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_BASE_ATOMIC_FILE_H_
