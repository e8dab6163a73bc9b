#include "services/base/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "services/base/file_paths.h"
#include "services/base/os_error.h"

namespace gaptrain {
namespace {

// Writes all n bytes, retrying on EINTR and short writes; returns 0 or errno.
int WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (w == 0) return EIO;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return 0;
}

int FsyncRetry(int fd) {
  while (::fsync(fd) != 0) {
    if (errno != EINTR) return errno;
  }
  return 0;
}

// The rename is only durable once the directory entry is on disk.
Status SyncDirectory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return OsError(dir, "open directory for fsync", errno);
  int err = FsyncRetry(fd);
  ::close(fd);
  if (err != 0) return OsError(dir, "fsync directory", err);
  return Status::OK();
}

}  // namespace

AtomicFile::AtomicFile(std::string path)
    : path_(std::move(path)), temp_(path_ + kAtomicFileTempSuffix) {}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (created_ && !committed_) ::unlink(temp_.c_str());
}

Status AtomicFile::Open() {
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd_ < 0) return OsError(temp_, "create", errno);
  created_ = true;
  return Status::OK();
}

Status AtomicFile::Append(const void* data, size_t n) {
  if (int err = WriteAll(fd_, static_cast<const char*>(data), n)) {
    return OsError(temp_, "write", err);
  }
  return Status::OK();
}

Status AtomicFile::Commit() {
  // Without the fsync the rename could reach the disk before the data, and
  // a crash would leave `path` empty or partial.
  if (int err = FsyncRetry(fd_)) return OsError(temp_, "fsync", err);
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) return OsError(temp_, "close", errno);
  if (::rename(temp_.c_str(), path_.c_str()) != 0) {
    return OsError(path_, ("rename from " + temp_).c_str(), errno);
  }
  committed_ = true;
  return SyncDirectory(DirName(path_));
}

Status WriteFileAtomically(const std::string& path, const void* data, size_t size) {
  AtomicFile file(path);
  GAPTRAIN_RETURN_IF_ERROR(file.Open());
  GAPTRAIN_RETURN_IF_ERROR(file.Append(data, size));
  return file.Commit();
}

}  // namespace gaptrain
