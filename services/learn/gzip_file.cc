#include "services/learn/gzip_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

namespace gaptrain {
namespace {

// zlib's input buffer; larger than the 8 KiB default to cut read() calls.
constexpr unsigned kGzBufferBytes = 256 * 1024;
// The most one gzread() call asks for. zlib drops the count of a call that
// fails, so this bounds how far below the truth the uncompressed offset of
// an error can be (plus the decompressed bytes zlib buffers, < 512 KiB).
constexpr size_t kReadChunk = size_t{1} << 20;

class GzCloser {
 public:
  explicit GzCloser(gzFile f) : f_(f) {}
  ~GzCloser() {
    if (f_ != nullptr) gzclose_r(f_);
  }
  GzCloser(const GzCloser&) = delete;
  GzCloser& operator=(const GzCloser&) = delete;

 private:
  gzFile f_;
};

Status OsError(const std::string& path, const char* what, int err) {
  std::string m = path + ": " + what + ": " + std::strerror(err);
  if (err == ENOENT || err == ENOTDIR) return Status::NotFound(m);
  return Status::Unavailable(m);
}

// gzerror's message, without the "<fd:N>: " that zlib puts before it for a
// file opened with gzdopen (callers name the real path instead).
std::string ZlibReason(const char* msg, const char* fallback) {
  if (msg == nullptr || *msg == '\0') return fallback;
  std::string m(msg);
  if (m.compare(0, 4, "<fd:") == 0) {
    size_t colon = m.find(">: ");
    if (colon != std::string::npos) m.erase(0, colon + 3);
  }
  return m;
}

// The expected uncompressed size: the file size for a plain file; for gzip
// the trailer's ISIZE (the last member's length mod 2^32, exact for the
// usual single member), if plausible. Only sizes the first allocation.
size_t SizeHint(int fd, uint64_t file_size) {
  // +1 here too: a buffer the file fills exactly would be doubled (a copy
  // and twice the pages) only to find the end of the file.
  const size_t fallback = std::max<size_t>(static_cast<size_t>(file_size) + 1, 4096);
  unsigned char magic[2];
  unsigned char trailer[4];
  if (file_size < 18 || ::pread(fd, magic, 2, 0) != 2 || magic[0] != 0x1f ||
      magic[1] != 0x8b ||
      ::pread(fd, trailer, 4, static_cast<off_t>(file_size - 4)) != 4) {
    return fallback;
  }
  const uint64_t isize = uint64_t{trailer[0]} | (uint64_t{trailer[1]} << 8) |
                         (uint64_t{trailer[2]} << 16) | (uint64_t{trailer[3]} << 24);
  // A damaged trailer must not cause a huge allocation: beyond 16x (MNIST's
  // images are 4.7x) fall back to doubling, as for multi-member files.
  if (isize < file_size / 2 || isize > file_size * 16) return fallback;
  return std::max<size_t>(static_cast<size_t>(isize) + 1, 4096);  // +1: see EOF at once
}


// A dataset file fills tens of MB that are written once and read every
// epoch: in 2 MiB pages it faults in 512 times less often (the kernel's
// transparent huge pages, in "madvise" mode on most distributions). Only
// the 2 MiB-aligned interior of [data, data + bytes) is advised; a kernel
// without THP ignores it.
void AdviseHugePages(void* data, size_t bytes) {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  if (bytes < 2 * kHuge) return;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) & ~(kHuge - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

// Reads at most `limit` (decompressed) bytes of `path` into *contents: a
// std::string or a std::vector<uint8_t>, so a dataset lands in the buffer it
// is kept in, with no second copy.
template <class Bytes>
Status ReadInto(const std::string& path, size_t limit, Bytes* contents) {
  contents->clear();
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT || err == ENOTDIR) {
      return Status::NotFound(path + ": file not found");
    }
    return OsError(path, "cannot open", err);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return OsError(path, "cannot stat", err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument(path + ": not a regular file" +
                                   (S_ISDIR(st.st_mode) ? " (a directory)" : ""));
  }
  // gzdopen is gzopen on an open descriptor: it takes ownership of fd on
  // success (gzclose_r closes it) and leaves it open on failure.
  gzFile gz = gzdopen(fd, "rb");
  if (gz == nullptr) {
    ::close(fd);
    return Status::Internal(path + ": gzdopen failed (out of memory)");
  }
  GzCloser closer(gz);
  gzbuffer(gz, kGzBufferBytes);

  // Read straight into the buffer, sized from a hint and doubled as needed.
  size_t capacity = std::min(SizeHint(fd, static_cast<uint64_t>(st.st_size)), limit);
  Bytes out;
  out.reserve(capacity);
  AdviseHugePages(out.data(), capacity);  // before the first write touches it
  out.resize(capacity);
  size_t used = 0;
  while (used < limit) {
    if (used == out.size()) out.resize(std::min(out.size() * 2, limit));
    size_t want = std::min(out.size() - used, kReadChunk);
    errno = 0;
    int got = gzread(gz, &out[used], static_cast<unsigned>(want));
    int err_no = errno;
    int zerr = Z_OK;
    const char* zmsg = gzerror(gz, &zerr);
    if (got < 0 || (zerr != Z_OK && zerr != Z_BUF_ERROR)) {
      if (got > 0) used += static_cast<size_t>(got);
      if (zerr == Z_ERRNO) return OsError(path, "read error", err_no != 0 ? err_no : EIO);
      return Status::DataLoss(
          path + ": corrupt gzip stream (" + ZlibReason(zmsg, "compressed data error") +
          ") at compressed offset " + std::to_string(static_cast<long long>(gzoffset(gz))) +
          " of " + std::to_string(static_cast<long long>(st.st_size)) +
          ", uncompressed offset at least " + std::to_string(used));
    }
    used += static_cast<size_t>(got);
    if (got == 0 || gzeof(gz)) {
      // gzread reports a gzip stream that ends early only through gzerror.
      if (zerr == Z_BUF_ERROR) {
        return Status::DataLoss(
            path + ": truncated gzip stream (" + ZlibReason(zmsg, "unexpected end of file") +
            ") at compressed offset " + std::to_string(static_cast<long long>(st.st_size)) +
            " (end of file), uncompressed offset " + std::to_string(used));
      }
      if (got == 0) break;
    }
  }
  out.resize(used);
  contents->swap(out);
  return Status::OK();
}

}  // namespace

Status ReadFileMaybeGzip(const std::string& path, std::string* contents) {
  return ReadInto(path, SIZE_MAX, contents);
}

Status ReadFileMaybeGzip(const std::string& path, std::vector<uint8_t>* contents) {
  return ReadInto(path, SIZE_MAX, contents);
}

Status ReadFileHeadMaybeGzip(const std::string& path, size_t max_bytes,
                             std::string* contents) {
  return ReadInto(path, max_bytes, contents);
}

}  // namespace gaptrain
