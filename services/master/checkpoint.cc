#include "services/master/checkpoint.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <new>
#include <set>
#include <utility>

#include "proto/gaptrain.pb.h"
#include "services/base/atomic_file.h"
#include "services/base/os_error.h"
#include "services/base/utf8.h"
#include "services/master/layout_proto.h"

namespace gaptrain {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "checkpoints hold the store's little-endian memory as is");

constexpr char kMagic[8] = {'\x89', 'G', 'T', 'C', 'K', 'P', 'T', '\n'};
constexpr char kEndMagic[8] = {'\n', 'T', 'P', 'K', 'C', 'T', 'G', '\x89'};
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kPrefixBytes = 24;   // magic, format version, H, D
constexpr size_t kTrailerBytes = 12;  // CRC, end magic
constexpr uint32_t kMaxHeaderBytes = uint32_t{64} << 20;
// Bytes per read()/write() and CRC pass: amortises the system call and stays
// in cache between the CRC and the copy.
constexpr size_t kChunkBytes = size_t{1} << 20;

constexpr char kFilePrefix[] = "ckpt-";
constexpr char kFileSuffix[] = ".gtc";
constexpr size_t kVersionDigits = 20;

// DATA_LOSS naming the file and what is wrong with it.
Status Corrupt(const std::string& path, const std::string& what) {
  return Status::DataLoss(path + ": " + what);
}

void EncodeFixed32(char* p, uint32_t v) { std::memcpy(p, &v, 4); }
void EncodeFixed64(char* p, uint64_t v) { std::memcpy(p, &v, 8); }
uint32_t DecodeFixed32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t DecodeFixed64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

uint32_t Crc(uint32_t crc, const void* data, size_t n) {
  return static_cast<uint32_t>(crc32_z(crc, static_cast<const Bytef*>(data), n));
}

std::string Hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08" PRIx32, v);
  return buf;
}

// Closes a descriptor on every path out of a function.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  // Closes now, reporting close()'s errno (0 on success).
  int Close() {
    int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

// Reads n bytes at `offset`, retrying on EINTR and short reads; *got is less
// than n only at end of file. Returns 0 or errno.
int PreadAll(int fd, uint64_t offset, char* p, size_t n, size_t* got) {
  *got = 0;
  while (*got < n) {
    ssize_t r = ::pread(fd, p + *got, n - *got, static_cast<off_t>(offset + *got));
    if (r < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (r == 0) break;
    *got += static_cast<size_t>(r);
  }
  return 0;
}

// Appends n bytes a chunk at a time, folding each chunk into *crc just
// before it is written, while it is still in cache.
Status AppendWithCrc(AtomicFile* file, const void* data, size_t n, uint32_t* crc) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    size_t chunk = std::min(n, kChunkBytes);
    *crc = Crc(*crc, p, chunk);
    GAPTRAIN_RETURN_IF_ERROR(file->Append(p, chunk));
    p += chunk;
    n -= chunk;
  }
  return Status::OK();
}

proto::CheckpointDType DTypeToProto(DType t) {
  return t == DType::kFloat32 ? proto::CHECKPOINT_DTYPE_FP32 : proto::CHECKPOINT_DTYPE_BF16;
}

// Builds the header, checking what the format cannot hold.
Status BuildHeader(const ParameterStore& store, const CheckpointMeta& meta, const std::string& path,
                   std::string* out) {
  auto invalid = [&path](const std::string& what) {
    return Status::InvalidArgument(path + ": cannot checkpoint: " + what);
  };
  if (store.size() == 0) return invalid("the model has no parameters");
  if (!IsUtf8(meta.job_name)) return invalid("job name is not UTF-8");
  if (!IsUtf8(meta.rule)) return invalid("rule name is not UTF-8");

  proto::CheckpointHeader header;
  header.set_job_name(meta.job_name);
  header.set_rule(meta.rule);
  header.set_version(store.version());
  header.set_created_unix_ms(meta.created_unix_ms);
  for (const TensorSpec& t : store.layout().tensors()) {
    if (!IsUtf8(t.name)) return invalid("tensor name '" + t.name + "' is not UTF-8");
  }
  LayoutToProto(store.layout(), header.mutable_layout());
  for (const BufferSpec& b : meta.buffer_layout.buffers()) {
    if (!IsUtf8(b.name)) return invalid("module buffer name '" + b.name + "' is not UTF-8");
  }
  BufferLayoutToProto(meta.buffer_layout, header.mutable_layout());
  if (!meta.buffer_values.empty() && meta.buffer_values.size() != meta.buffer_layout.bytes()) {
    return invalid("the module's buffer values are " + std::to_string(meta.buffer_values.size()) +
                   " bytes, their layout " + std::to_string(meta.buffer_layout.bytes()));
  }
  header.set_model_buffer_bytes(meta.buffer_values.size());
  header.set_model_buffer_merges(meta.buffer_merges);
  for (const auto& [name, value] : store.scalars()) {
    if (!IsUtf8(name)) return invalid("scalar name '" + name + "' is not UTF-8");
    proto::CheckpointScalar* s = header.add_scalars();
    s->set_name(name);
    s->set_value(value);
  }
  for (const auto& [name, buffer] : store.buffers()) {
    if (name.empty()) return invalid("a state buffer has an empty name");
    if (!IsUtf8(name)) return invalid("buffer name '" + name + "' is not UTF-8");
    if (buffer.size() != store.size()) {
      return invalid("buffer '" + name + "' has " + std::to_string(buffer.size()) +
                     " values, the model has " + std::to_string(store.size()));
    }
    proto::CheckpointBuffer* b = header.add_buffers();
    b->set_name(name);
    b->set_dtype(DTypeToProto(buffer.dtype()));
    b->set_byte_length(buffer.bytes());
  }
  for (WorkerId w : meta.workers) header.add_workers(w);
  header.set_incarnation(meta.incarnation);
  if (meta.shard.count > 1) {
    proto::ShardRange* shard = header.mutable_shard();
    shard->set_index(meta.shard.index);
    shard->set_count(meta.shard.count);
    shard->set_begin(meta.shard.begin);
    shard->set_end(meta.shard.end);
    LayoutToProto(meta.model_layout, header.mutable_model());
    BufferLayoutToProto(meta.model_buffers, header.mutable_model());
  }

  if (header.ByteSizeLong() > kMaxHeaderBytes) {
    return invalid("header of " + std::to_string(header.ByteSizeLong()) +
                   " bytes exceeds the 64 MiB limit");
  }
  if (!header.SerializeToString(out)) return Status::Internal(path + ": header does not serialise");
  return Status::OK();
}

// The validated content of a header: what ReadCheckpoint allocates.
struct ParsedHeader {
  ParameterLayout layout;
  std::vector<std::pair<std::string, DType>> buffers;
  BufferLayout module_buffers;
  ParameterShard shard;
  ParameterLayout model_layout;
  BufferLayout model_buffers;
};

// The shard a file holds, checked against its layout: the whole model's
// must cut to it (shard_plan.h).
Status ValidateShard(const proto::CheckpointHeader& header, const std::string& path,
                     ParsedHeader* out) {
  const proto::ShardRange& s = header.shard();
  if (s.count() <= 1) {
    out->shard = ParameterShard{0, 1, 0, out->layout.size()};
    out->model_layout = out->layout;
    out->model_buffers = out->module_buffers;
    return Status::OK();
  }
  Status parsed = LayoutFromProto(header.model(), &out->model_layout);
  if (parsed.ok()) parsed = BufferLayoutFromProto(header.model(), &out->model_buffers);
  if (!parsed.ok()) return Corrupt(path, "header: model: " + parsed.message());
  std::vector<ParameterShard> plan;
  if (s.index() >= s.count() || !PlanShards(out->model_layout, s.count(), &plan).ok() ||
      plan[s.index()].begin != s.begin() || plan[s.index()].end != s.end() ||
      ShardLayout(out->model_layout, plan[s.index()]) != out->layout) {
    return Corrupt(path, "header: shard " + std::to_string(s.index()) + " of " +
                             std::to_string(s.count()) + " [" + std::to_string(s.begin()) +
                             ", " + std::to_string(s.end()) +
                             ") is not that part of the model's layout");
  }
  out->shard = plan[s.index()];
  return Status::OK();
}

Status ValidateHeader(const proto::CheckpointHeader& header, uint64_t data_length,
                      const std::string& path, ParsedHeader* out) {
  Status s = LayoutFromProto(header.layout(), &out->layout);
  if (!s.ok()) return Corrupt(path, "header: " + s.message());
  const uint64_t p = out->layout.size();
  if (p == 0) return Corrupt(path, "header: the layout has no parameters");

  uint64_t expected = p * sizeof(float);  // p <= 2^34: no overflow
  std::set<std::string> names;
  for (int i = 0; i < header.buffers_size(); ++i) {
    const proto::CheckpointBuffer& b = header.buffers(i);
    const std::string where = "header: buffers[" + std::to_string(i) + "] ('" + b.name() + "')";
    if (b.name().empty()) return Corrupt(path, where + ": empty name");
    if (!names.insert(b.name()).second) return Corrupt(path, where + ": duplicate name");
    DType dtype;
    switch (b.dtype()) {
      case proto::CHECKPOINT_DTYPE_FP32:
        dtype = DType::kFloat32;
        break;
      case proto::CHECKPOINT_DTYPE_BF16:
        dtype = DType::kBfloat16;
        break;
      default:
        return Corrupt(path, where + ": unknown dtype " + std::to_string(b.dtype()));
    }
    const uint64_t want = p * DTypeSize(dtype);
    if (b.byte_length() != want) {
      return Corrupt(path, where + ": " + std::to_string(b.byte_length()) + " bytes, " +
                               DTypeName(dtype) + " of " + std::to_string(p) + " parameters is " +
                               std::to_string(want));
    }
    expected += want;  // <= 2^36 per buffer, < 2^26 buffers: no overflow
    out->buffers.emplace_back(b.name(), dtype);
  }
  s = BufferLayoutFromProto(header.layout(), &out->module_buffers);
  if (!s.ok()) return Corrupt(path, "header: " + s.message());
  if (header.model_buffer_bytes() != 0 &&
      header.model_buffer_bytes() != out->module_buffers.bytes()) {
    return Corrupt(path, "header: model_buffer_bytes " +
                             std::to_string(header.model_buffer_bytes()) + ", its buffers hold " +
                             std::to_string(out->module_buffers.bytes()));
  }
  expected += header.model_buffer_bytes();  // <= 4 MiB
  GAPTRAIN_RETURN_IF_ERROR(ValidateShard(header, path, out));
  if (expected != data_length) {
    return Corrupt(path, "data length " + std::to_string(data_length) + " differs from the " +
                             std::to_string(expected) + " bytes the header describes");
  }
  std::set<std::string> scalars;
  for (int i = 0; i < header.scalars_size(); ++i) {
    if (!scalars.insert(header.scalars(i).name()).second) {
      return Corrupt(path, "header: scalars[" + std::to_string(i) + "] ('" +
                               header.scalars(i).name() + "'): duplicate name");
    }
  }
  return Status::OK();
}

// Reads n bytes at *offset into dst, folding them into *crc.
Status ReadChunked(int fd, const std::string& path, uint64_t* offset, char* dst, size_t n,
                   uint32_t* crc) {
  while (n > 0) {
    size_t chunk = std::min(n, kChunkBytes);
    size_t got;
    if (int err = PreadAll(fd, *offset, dst, chunk, &got)) return OsError(path, "read", err);
    if (got != chunk) {
      return Corrupt(path, "file ended at byte " + std::to_string(*offset + got) +
                               " while being read (truncated concurrently?)");
    }
    *crc = Crc(*crc, dst, chunk);
    *offset += chunk;
    dst += chunk;
    n -= chunk;
  }
  return Status::OK();
}

}  // namespace

Status WriteCheckpoint(const ParameterStore& store, const CheckpointMeta& meta,
                       const std::string& path) {
  std::string header;
  GAPTRAIN_RETURN_IF_ERROR(BuildHeader(store, meta, path, &header));
  uint64_t data_length = store.size() * sizeof(float);
  for (const auto& [name, buffer] : store.buffers()) data_length += buffer.bytes();
  data_length += meta.buffer_values.size();

  char prefix[kPrefixBytes];
  std::memcpy(prefix, kMagic, 8);
  EncodeFixed32(prefix + 8, kFormatVersion);
  EncodeFixed32(prefix + 12, static_cast<uint32_t>(header.size()));
  EncodeFixed64(prefix + 16, data_length);

  AtomicFile file(path);
  GAPTRAIN_RETURN_IF_ERROR(file.Open());
  uint32_t crc = 0;
  GAPTRAIN_RETURN_IF_ERROR(AppendWithCrc(&file, prefix, sizeof prefix, &crc));
  GAPTRAIN_RETURN_IF_ERROR(AppendWithCrc(&file, header.data(), header.size(), &crc));
  GAPTRAIN_RETURN_IF_ERROR(
      AppendWithCrc(&file, store.params(), store.size() * sizeof(float), &crc));
  for (const auto& [name, buffer] : store.buffers()) {
    GAPTRAIN_RETURN_IF_ERROR(AppendWithCrc(&file, buffer.data(), buffer.bytes(), &crc));
  }
  GAPTRAIN_RETURN_IF_ERROR(
      AppendWithCrc(&file, meta.buffer_values.data(), meta.buffer_values.size(), &crc));
  char trailer[kTrailerBytes];
  EncodeFixed32(trailer, crc);
  std::memcpy(trailer + 4, kEndMagic, 8);
  GAPTRAIN_RETURN_IF_ERROR(file.Append(trailer, sizeof trailer));
  return file.Commit();
}

Status ReadCheckpoint(const std::string& path, std::unique_ptr<ParameterStore>* store,
                      CheckpointMeta* meta) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return OsError(path, "open", errno);
  FdCloser closer(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0) return OsError(path, "stat", errno);
  if (!S_ISREG(st.st_mode)) return Corrupt(path, "not a regular file");
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  constexpr uint64_t kFixed = kPrefixBytes + kTrailerBytes;
  if (file_size == 0) return Corrupt(path, "file is empty");
  if (file_size < kFixed) {
    return Corrupt(path, "file is " + std::to_string(file_size) +
                             " bytes, shorter than the 36 of an empty checkpoint (torn)");
  }
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);

  char prefix[kPrefixBytes];
  size_t got;
  if (int err = PreadAll(fd, 0, prefix, sizeof prefix, &got)) return OsError(path, "read", err);
  if (got != sizeof prefix) return Corrupt(path, "file shrank while being read");
  if (std::memcmp(prefix, kMagic, 8) != 0) {
    return Corrupt(path, "bad magic: not a gaptrain checkpoint");
  }
  const uint32_t format = DecodeFixed32(prefix + 8);
  if (format != kFormatVersion) {
    return Corrupt(path, "format version " + std::to_string(format) + ", this build reads " +
                             std::to_string(kFormatVersion));
  }
  const uint32_t header_length = DecodeFixed32(prefix + 12);
  const uint64_t data_length = DecodeFixed64(prefix + 16);
  if (header_length > kMaxHeaderBytes) {
    return Corrupt(path,
                   "header length " + std::to_string(header_length) + " exceeds the 64 MiB limit");
  }
  const uint64_t room = file_size - kFixed;  // for header and data
  if (header_length > room || data_length != room - header_length) {
    return Corrupt(path, "file is " + std::to_string(file_size) +
                             " bytes but its lengths say 36 + " + std::to_string(header_length) +
                             " + " + std::to_string(data_length) + " (torn or corrupt)");
  }

  char trailer[kTrailerBytes];
  if (int err = PreadAll(fd, file_size - kTrailerBytes, trailer, sizeof trailer, &got)) {
    return OsError(path, "read", err);
  }
  if (got != sizeof trailer) return Corrupt(path, "file shrank while being read");
  if (std::memcmp(trailer + 4, kEndMagic, 8) != 0) {
    return Corrupt(path, "bad end magic (torn or corrupt)");
  }
  const uint32_t stored_crc = DecodeFixed32(trailer);

  // Header and data are read once, CRC'd as they go; nothing leaves this
  // function until the CRC matches. Allocations are bounded by the file
  // size, checked above.
  uint32_t crc = Crc(0, prefix, sizeof prefix);
  uint64_t offset = kPrefixBytes;
  std::string header_bytes(header_length, '\0');
  GAPTRAIN_RETURN_IF_ERROR(
      ReadChunked(fd, path, &offset, header_bytes.data(), header_length, &crc));
  proto::CheckpointHeader header;
  if (!header.ParseFromString(header_bytes)) return Corrupt(path, "header does not parse");
  ParsedHeader parsed;
  GAPTRAIN_RETURN_IF_ERROR(ValidateHeader(header, data_length, path, &parsed));

  std::unique_ptr<ParameterStore> loaded;
  try {
    loaded = std::make_unique<ParameterStore>(std::move(parsed.layout));
    for (const auto& [name, dtype] : parsed.buffers) loaded->AddBuffer(name, dtype);
  } catch (const std::bad_alloc&) {
    return Status(Status::Code::kResourceExhausted, path + ": cannot allocate " +
                                                        std::to_string(data_length) +
                                                        " bytes for the checkpoint's buffers");
  }
  GAPTRAIN_RETURN_IF_ERROR(ReadChunked(fd, path, &offset, reinterpret_cast<char*>(loaded->params()),
                                       loaded->size() * sizeof(float), &crc));
  for (const auto& [name, dtype] : parsed.buffers) {
    FlatBuffer* b = loaded->buffer(name);
    GAPTRAIN_RETURN_IF_ERROR(
        ReadChunked(fd, path, &offset, static_cast<char*>(b->data()), b->bytes(), &crc));
  }
  std::string module_buffer_values(header.model_buffer_bytes(), '\0');
  GAPTRAIN_RETURN_IF_ERROR(ReadChunked(fd, path, &offset, module_buffer_values.data(),
                                       module_buffer_values.size(), &crc));
  if (crc != stored_crc) {
    return Corrupt(path,
                   "CRC-32 mismatch: stored " + Hex32(stored_crc) + ", computed " + Hex32(crc));
  }

  loaded->set_version(header.version());
  for (const proto::CheckpointScalar& s : header.scalars()) {
    loaded->set_scalar(s.name(), s.value());
  }
  if (meta != nullptr) {
    meta->job_name = header.job_name();
    meta->rule = header.rule();
    meta->created_unix_ms = header.created_unix_ms();
    meta->workers.assign(header.workers().begin(), header.workers().end());
    meta->incarnation = header.incarnation();
    meta->buffer_layout = std::move(parsed.module_buffers);
    meta->buffer_values = std::move(module_buffer_values);
    meta->buffer_merges = header.model_buffer_merges();
    meta->shard = parsed.shard;
    meta->model_layout = std::move(parsed.model_layout);
    meta->model_buffers = std::move(parsed.model_buffers);
  }
  *store = std::move(loaded);
  return Status::OK();
}

// ---------------------------------------------------------------------------
// CheckpointDirectory

namespace {

// The directory's checkpoint versions (ascending) and stale temp names.
Status ScanDirectory(const std::string& dir, std::vector<uint64_t>* versions,
                     std::vector<std::string>* temps) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return OsError(dir, "open directory", errno);
  versions->clear();
  if (temps != nullptr) temps->clear();
  const size_t temp_len = sizeof(kAtomicFileTempSuffix) - 1;
  while (true) {
    errno = 0;
    struct dirent* e = ::readdir(d);
    if (e == nullptr) {
      int err = errno;
      ::closedir(d);
      if (err != 0) return OsError(dir, "read directory", err);
      break;
    }
    std::string name = e->d_name;
    uint64_t v;
    if (CheckpointDirectory::ParseFileName(name, &v)) {
      versions->push_back(v);
    } else if (temps != nullptr && name.size() > temp_len &&
               name.compare(name.size() - temp_len, temp_len, kAtomicFileTempSuffix) == 0 &&
               CheckpointDirectory::ParseFileName(name.substr(0, name.size() - temp_len), &v)) {
      temps->push_back(name);
    }
  }
  std::sort(versions->begin(), versions->end());
  return Status::OK();
}

}  // namespace

CheckpointDirectory::CheckpointDirectory(std::string dir, uint32_t keep)
    : dir_(dir.empty() ? "." : std::move(dir)), keep_(std::max<uint32_t>(keep, 1)) {}

std::string CheckpointDirectory::FileName(uint64_t version) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s%020" PRIu64 "%s", kFilePrefix, version, kFileSuffix);
  return buf;
}

bool CheckpointDirectory::ParseFileName(const std::string& name, uint64_t* version) {
  const size_t prefix_len = sizeof(kFilePrefix) - 1;
  const size_t suffix_len = sizeof(kFileSuffix) - 1;
  if (name.size() != prefix_len + kVersionDigits + suffix_len) return false;
  if (name.compare(0, prefix_len, kFilePrefix) != 0) return false;
  if (name.compare(prefix_len + kVersionDigits, suffix_len, kFileSuffix) != 0) return false;
  uint64_t v = 0;
  for (size_t i = prefix_len; i < prefix_len + kVersionDigits; ++i) {
    char c = name[i];
    if (c < '0' || c > '9') return false;
    uint64_t digit = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - digit) / 10) return false;
    v = v * 10 + digit;
  }
  *version = v;
  return true;
}

std::string CheckpointDirectory::PathOf(uint64_t version) const {
  return (dir_.back() == '/' ? dir_ : dir_ + "/") + FileName(version);
}

Status CheckpointDirectory::ListVersions(std::vector<uint64_t>* versions) const {
  return ScanDirectory(dir_, versions, nullptr);
}

std::vector<std::string> CheckpointDirectory::List() const {
  std::vector<uint64_t> versions;
  std::vector<std::string> paths;
  if (!ListVersions(&versions).ok()) return paths;
  for (uint64_t v : versions) paths.push_back(PathOf(v));
  return paths;
}

Status CheckpointDirectory::Save(const ParameterStore& store, const CheckpointMeta& meta,
                                 std::string* written_path) {
  GAPTRAIN_RETURN_IF_ERROR(MakeDirs(dir_));
  std::vector<uint64_t> versions;
  std::vector<std::string> temps;
  GAPTRAIN_RETURN_IF_ERROR(ScanDirectory(dir_, &versions, &temps));
  // Leftovers of a crash: removing them is best effort (a temp of this
  // version is truncated by the write anyway).
  for (const std::string& t : temps) {
    ::unlink(((dir_.back() == '/' ? dir_ : dir_ + "/") + t).c_str());
  }

  const uint64_t version = store.version();
  const std::string path = PathOf(version);
  GAPTRAIN_RETURN_IF_ERROR(WriteCheckpoint(store, meta, path));
  if (written_path != nullptr) *written_path = path;

  GAPTRAIN_RETURN_IF_ERROR(ScanDirectory(dir_, &versions, nullptr));
  size_t remaining = versions.size();
  for (uint64_t v : versions) {  // ascending: oldest first
    if (remaining <= keep_) break;
    if (v == version) continue;
    const std::string old = PathOf(v);
    if (::unlink(old.c_str()) != 0 && errno != ENOENT) {
      return OsError(old, "remove old checkpoint", errno);
    }
    --remaining;
  }
  return Status::OK();
}

Status CheckpointDirectory::RestoreNewest(std::unique_ptr<ParameterStore>* store,
                                          CheckpointMeta* meta, std::string* restored_path,
                                          std::vector<std::string>* skipped) {
  std::vector<uint64_t> versions;
  Status s = ListVersions(&versions);
  if (s.code() == Status::Code::kNotFound) {
    return Status::NotFound(dir_ + ": no checkpoint (" + s.message() + ")");
  }
  GAPTRAIN_RETURN_IF_ERROR(s);
  if (versions.empty()) return Status::NotFound(dir_ + ": no checkpoint");

  std::string newest_reason;
  bool any_corrupt = false;
  for (auto it = versions.rbegin(); it != versions.rend(); ++it) {
    const std::string path = PathOf(*it);
    std::unique_ptr<ParameterStore> loaded;
    CheckpointMeta loaded_meta;
    Status r = ReadCheckpoint(path, &loaded, &loaded_meta);
    if (r.ok() && loaded->version() != *it) {
      r = Corrupt(path, "holds version " + std::to_string(loaded->version()) +
                            " but its name says " + std::to_string(*it));
    }
    if (r.ok()) {
      *store = std::move(loaded);
      if (meta != nullptr) *meta = std::move(loaded_meta);
      if (restored_path != nullptr) *restored_path = path;
      return Status::OK();
    }
    if (r.code() != Status::Code::kDataLoss && r.code() != Status::Code::kNotFound) return r;
    any_corrupt |= r.code() == Status::Code::kDataLoss;
    if (newest_reason.empty()) newest_reason = r.message();
    if (skipped != nullptr) skipped->push_back(r.message());
  }
  if (!any_corrupt) return Status::NotFound(dir_ + ": no checkpoint (all vanished)");
  return Status::DataLoss(dir_ + ": none of " + std::to_string(versions.size()) +
                          " checkpoints is valid; newest: " + newest_reason);
}

}  // namespace gaptrain
