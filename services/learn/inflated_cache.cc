#include "services/learn/inflated_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "services/base/atomic_file.h"
#include "services/base/os_error.h"
#include "services/learn/gzip_file.h"

namespace gaptrain {
namespace {

using Kind = InflatedCacheOutcome::Kind;

// What a single-member gzip file's last 8 bytes promise of its content.
struct GzipTrailer {
  uint32_t crc = 0;
  uint32_t size_mod_2_32 = 0;  // ISIZE
};

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

uint32_t Le32(const unsigned char* p) {
  return uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}

// False for a plain file (or one that cannot be read: the source read
// then reports why).
bool ReadGzipTrailer(const std::string& path, GzipTrailer* trailer) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st;
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 18) {
    return false;
  }
  unsigned char magic[2];
  unsigned char tail[8];
  if (::pread(fd.get(), magic, 2, 0) != 2 || magic[0] != 0x1f || magic[1] != 0x8b) return false;
  if (::pread(fd.get(), tail, 8, st.st_size - 8) != 8) return false;
  trailer->crc = Le32(tail);
  trailer->size_mod_2_32 = Le32(tail + 4);
  return true;
}

uint32_t Crc32(const std::vector<uint8_t>& bytes) {
  return static_cast<uint32_t>(crc32_z(0, bytes.data(), bytes.size()));
}

bool Matches(const std::vector<uint8_t>& bytes, const GzipTrailer& trailer) {
  return static_cast<uint32_t>(bytes.size()) == trailer.size_mod_2_32 &&
         Crc32(bytes) == trailer.crc;
}

// The copy's bytes when it holds what the trailer promises; false (and
// *contents cleared) for a missing, short, long or corrupted copy.
bool ReadValidCopy(const std::string& copy, const GzipTrailer& trailer,
                   std::vector<uint8_t>* contents) {
  contents->clear();
  Fd fd(::open(copy.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st;
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<uint32_t>(st.st_size) != trailer.size_mod_2_32) {
    return false;
  }
  contents->resize(static_cast<size_t>(st.st_size));
  size_t used = 0;
  while (used < contents->size()) {
    const ssize_t got = ::read(fd.get(), contents->data() + used, contents->size() - used);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    used += static_cast<size_t>(got);
  }
  if (used != contents->size() || !Matches(*contents, trailer)) {
    contents->clear();
    return false;
  }
  return true;
}

std::string Hex32(uint32_t v) {
  char text[9];
  std::snprintf(text, sizeof(text), "%08x", v);
  return text;
}

// "train-images-idx3-ubyte.<crc>-<size>" for ".../train-images-idx3-ubyte.gz".
std::string CopyName(const std::string& path, const GzipTrailer& trailer) {
  std::string name = path.substr(path.find_last_of('/') + 1);
  if (name.size() > 3 && name.compare(name.size() - 3, 3, ".gz") == 0) name.resize(name.size() - 3);
  return name + "." + Hex32(trailer.crc) + "-" + std::to_string(trailer.size_mod_2_32);
}

Status ReadSource(const std::string& path, std::vector<uint8_t>* contents,
                  InflatedCacheOutcome* outcome, std::string reason) {
  outcome->kind = Kind::kBypassed;
  outcome->copy_path.clear();
  outcome->reason = std::move(reason);
  return ReadFileMaybeGzip(path, contents);
}

}  // namespace

Status ReadFileInflatedCached(const std::string& path, const std::string& cache_dir,
                              std::vector<uint8_t>* contents, InflatedCacheOutcome* outcome) {
  *outcome = InflatedCacheOutcome();
  GzipTrailer trailer;
  if (cache_dir.empty()) return ReadSource(path, contents, outcome, "no cache directory");
  if (!ReadGzipTrailer(path, &trailer)) {
    return ReadSource(path, contents, outcome, kNotGzipReason);
  }
  const std::string copy = cache_dir + "/" + CopyName(path, trailer);
  if (ReadValidCopy(copy, trailer, contents)) {
    outcome->kind = Kind::kHit;
    outcome->copy_path = copy;
    return Status::OK();
  }

  Status made = MakeDirs(cache_dir);
  if (!made.ok()) return ReadSource(path, contents, outcome, made.ToString());
  // One process inflates; the others wait here, then find its copy.
  const std::string lock_path = copy + ".lock";
  Fd lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (lock.get() < 0) {
    return ReadSource(path, contents, outcome, OsError(lock_path, "cannot open", errno).ToString());
  }
  int locked;
  do {
    locked = ::flock(lock.get(), LOCK_EX);
  } while (locked != 0 && errno == EINTR);
  if (locked != 0) {
    return ReadSource(path, contents, outcome, OsError(lock_path, "cannot lock", errno).ToString());
  }
  if (ReadValidCopy(copy, trailer, contents)) {
    outcome->kind = Kind::kHit;
    outcome->copy_path = copy;
    return Status::OK();
  }

  GAPTRAIN_RETURN_IF_ERROR(ReadFileMaybeGzip(path, contents));
  if (!Matches(*contents, trailer)) {
    // gzip itself checked every member's CRC: the file has several, and
    // its trailer speaks for the last one only.
    outcome->kind = Kind::kBypassed;
    outcome->reason = "a multi-member gzip file (its trailer covers the last member only)";
    return Status::OK();
  }
  Status written = WriteFileAtomically(copy, contents->data(), contents->size());
  if (!written.ok()) {
    outcome->kind = Kind::kBypassed;
    outcome->reason = written.ToString();
    return Status::OK();
  }
  outcome->kind = Kind::kFilled;
  outcome->copy_path = copy;
  return Status::OK();
}

}  // namespace gaptrain
