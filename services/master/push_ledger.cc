#include "services/master/push_ledger.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "services/base/os_error.h"

namespace gaptrain {
namespace {

constexpr char kMagic[8] = {'G', 'T', 'L', 'E', 'D', 'G', 'R', '1'};
constexpr uint32_t kFormat = 1;
constexpr size_t kFileSize = 4096;
constexpr size_t kCountersOffset = 16;  // after the magic and the format

}  // namespace

// The file's bytes. std::atomic<uint64_t> is lock-free and has the size
// and alignment of uint64_t here, so the layout is the plain one the
// header documents.
struct PushLedger::Fields {
  char magic[8];
  uint32_t format;
  uint32_t reserved;
  std::atomic<uint64_t> runs;
  std::atomic<uint64_t> last_run;
  std::atomic<uint64_t> version;
  std::atomic<uint64_t> pushes;
  std::atomic<uint64_t> rejected;
  std::atomic<uint64_t> updates;
  std::atomic<uint64_t> updates_lost;
  std::atomic<uint64_t> restores;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t));

namespace {

Status CheckHeader(const std::string& path, const char* bytes, size_t size) {
  if (size != kFileSize) {
    return Status::DataLoss(path + ": not a push ledger: " + std::to_string(size) +
                            " bytes, expected " + std::to_string(kFileSize));
  }
  if (std::memcmp(bytes, kMagic, sizeof kMagic) != 0) {
    return Status::DataLoss(path + ": not a push ledger (bad magic)");
  }
  uint32_t format;
  std::memcpy(&format, bytes + 8, sizeof format);
  if (format != kFormat) {
    return Status::DataLoss(path + ": push ledger format " + std::to_string(format) +
                            ", this master reads " + std::to_string(kFormat));
  }
  return Status::OK();
}

}  // namespace

Status PushLedger::Open(const std::string& path, std::unique_ptr<PushLedger>* ledger) {
  static_assert(sizeof(Fields) <= kFileSize);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return OsError(path, "open", errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return OsError(path, "stat", err);
  }
  const bool fresh = st.st_size == 0;
  if (fresh && ::ftruncate(fd, kFileSize) != 0) {
    const int err = errno;
    ::close(fd);
    return OsError(path, "ftruncate", err);
  }
  const size_t size = fresh ? kFileSize : static_cast<size_t>(st.st_size);
  if (size != kFileSize) {
    ::close(fd);
    return CheckHeader(path, nullptr, size);
  }
  void* mapping = ::mmap(nullptr, kFileSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  ::close(fd);  // the mapping keeps the file
  if (mapping == MAP_FAILED) return OsError(path, "mmap", err);
  Fields* fields = static_cast<Fields*>(mapping);
  if (fresh) {
    std::memcpy(fields->magic, kMagic, sizeof kMagic);
    fields->format = kFormat;
  } else if (Status s = CheckHeader(path, static_cast<const char*>(mapping), size); !s.ok()) {
    ::munmap(mapping, kFileSize);
    return s;
  }
  ledger->reset(new PushLedger(mapping, fields));
  return Status::OK();
}

Status PushLedger::Read(const std::string& path, Totals* totals) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return OsError(path, "open", errno);
  char bytes[kFileSize + 1];
  size_t size = 0;
  while (size < sizeof bytes) {
    const ssize_t n = ::read(fd, bytes + size, sizeof bytes - size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return OsError(path, "read", err);
    }
    if (n == 0) break;
    size += static_cast<size_t>(n);
  }
  ::close(fd);
  GAPTRAIN_RETURN_IF_ERROR(CheckHeader(path, bytes, size));
  uint64_t v[8];
  std::memcpy(v, bytes + kCountersOffset, sizeof v);
  *totals = {v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]};
  return Status::OK();
}

PushLedger::~PushLedger() { ::munmap(mapping_, kFileSize); }

void PushLedger::BeginRun(uint64_t incarnation, uint64_t version) {
  Fields& f = *fields_;
  const uint64_t reached = f.version.load();
  if (f.runs.load() > 0) {
    f.restores.fetch_add(1);
    if (reached > version) f.updates_lost.fetch_add(reached - version);
  }
  // A checkpoint newer than anything recorded (a new or replaced ledger):
  // the updates it holds were applied.
  if (version > reached) f.updates.fetch_add(version - reached);
  f.version.store(version);
  f.last_run.store(incarnation);
  f.runs.fetch_add(1);
}

void PushLedger::RecordRejected() {
  fields_->pushes.fetch_add(1, std::memory_order_relaxed);
  fields_->rejected.fetch_add(1, std::memory_order_relaxed);
}

void PushLedger::RecordVersion(uint64_t version, bool push) {
  Fields& f = *fields_;
  if (push) f.pushes.fetch_add(1, std::memory_order_relaxed);
  // Callers hold the engine's mutex, so versions arrive in order.
  const uint64_t before = f.version.load(std::memory_order_relaxed);
  if (version > before) {
    f.updates.fetch_add(version - before, std::memory_order_relaxed);
    f.version.store(version, std::memory_order_relaxed);
  }
}

PushLedger::Totals PushLedger::totals() const {
  const Fields& f = *fields_;
  return {f.runs.load(),     f.last_run.load(), f.version.load(),      f.pushes.load(),
          f.rejected.load(), f.updates.load(),  f.updates_lost.load(), f.restores.load()};
}

}  // namespace gaptrain
