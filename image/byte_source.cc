#include "image/byte_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace gaptrain {
namespace {

constexpr size_t kInputChunk = 1 << 20;

Status OsError(const std::string& name, const char* what, int err) {
  std::string m = name + ": " + what + ": " + std::strerror(err);
  if (err == ENOENT || err == ENOTDIR) return Status::NotFound(m);
  return Status::Unavailable(m);
}

}  // namespace

Status FileSource::Open(const std::string& path, std::unique_ptr<FileSource>* source) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return OsError(path, "cannot stat", errno);
  return OpenRange(path, 0, static_cast<uint64_t>(st.st_size), source);
}

Status FileSource::OpenRange(const std::string& path, uint64_t offset, uint64_t length,
                             std::unique_ptr<FileSource>* source) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return OsError(path, "cannot open", errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return OsError(path, "cannot stat", err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument(path + ": not a regular file");
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (offset > size || length > size - offset) {
    ::close(fd);
    return Status::OutOfRange(path + ": bytes [" + std::to_string(offset) + ", +" +
                              std::to_string(length) + ") lie beyond its end (" +
                              std::to_string(size) + " bytes)");
  }
  std::string name = path;
  if (offset != 0 || length != size) {
    name += "[" + std::to_string(offset) + ", +" + std::to_string(length) + ")";
  }
  source->reset(new FileSource(fd, std::move(name), offset, length));
  return Status::OK();
}

FileSource::~FileSource() { ::close(fd_); }

Status FileSource::Read(char* buffer, size_t capacity, size_t* got) {
  *got = 0;
  const uint64_t want = std::min<uint64_t>(capacity, end_ - position_);
  if (want == 0) return Status::OK();
  ssize_t n;
  do {
    n = ::pread(fd_, buffer, want, static_cast<off_t>(position_));
  } while (n < 0 && errno == EINTR);
  if (n < 0) return OsError(name_, "read error", errno);
  if (n == 0) {
    return Status::DataLoss(name_ + ": the file ends at offset " + std::to_string(position_) +
                            " (it shrank while being read)");
  }
  position_ += static_cast<uint64_t>(n);
  *got = static_cast<size_t>(n);
  return Status::OK();
}

GzipSource::GzipSource(ByteSource* compressed)
    : compressed_(compressed), input_(kInputChunk) {}

Status GzipSource::Open(ByteSource* compressed, std::unique_ptr<GzipSource>* source) {
  std::unique_ptr<GzipSource> s(new GzipSource(compressed));
  // 16 + MAX_WBITS: a gzip header and trailer, not zlib's.
  if (inflateInit2(&s->stream_, 16 + MAX_WBITS) != Z_OK) {
    return Status::Internal(s->name() + ": inflateInit2 failed (out of memory)");
  }
  *source = std::move(s);
  return Status::OK();
}

GzipSource::~GzipSource() { inflateEnd(&stream_); }

Status GzipSource::Read(char* buffer, size_t capacity, size_t* got) {
  *got = 0;
  while (*got == 0 && capacity > 0) {
    if (stream_.avail_in == 0 && !input_ended_) {
      size_t n = 0;
      GAPTRAIN_RETURN_IF_ERROR(compressed_->Read(input_.data(), input_.size(), &n));
      if (n == 0) input_ended_ = true;
      stream_.next_in = reinterpret_cast<Bytef*>(input_.data());
      stream_.avail_in = static_cast<uInt>(n);
    }
    if (member_ended_) {
      if (stream_.avail_in == 0 && input_ended_) return Status::OK();  // the end
      if (stream_.avail_in == 0) continue;
      inflateReset(&stream_);  // another member follows
      member_ended_ = false;
    }
    if (stream_.avail_in == 0 && input_ended_) {
      return Status::DataLoss(name() + ": truncated gzip stream (it ends after " +
                              std::to_string(produced_) + " decompressed bytes)");
    }
    stream_.next_out = reinterpret_cast<Bytef*>(buffer);
    stream_.avail_out = static_cast<uInt>(std::min<size_t>(capacity, 1u << 30));
    const uInt before = stream_.avail_out;
    const int rc = inflate(&stream_, Z_NO_FLUSH);
    *got = before - stream_.avail_out;
    produced_ += *got;
    if (rc == Z_STREAM_END) {
      member_ended_ = true;
    } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
      return Status::DataLoss(name() + ": corrupt gzip stream (" +
                              (stream_.msg != nullptr ? stream_.msg : "inflate error " +
                                                                          std::to_string(rc)) +
                              ") after " + std::to_string(produced_) + " decompressed bytes");
    }
  }
  return Status::OK();
}

}  // namespace gaptrain
