#include "services/coordinator/state_file.h"

#include <sys/stat.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>

#include "services/base/atomic_file.h"
#include "services/base/file_contents.h"

namespace gaptrain {
namespace {

constexpr char kMagic[8] = {'G', 'T', 'C', 'O', 'O', 'R', 'D', '1'};
constexpr size_t kPrefixBytes = 16;
constexpr uint32_t kMaxPayloadBytes = 64u << 20;

void PutFixed32(uint32_t v, char* out) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

uint32_t GetFixed32(const char* in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  return v;
}

uint32_t Crc(const std::string& bytes) {
  return static_cast<uint32_t>(
      crc32_z(0, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
}

}  // namespace

const char kStateFileName[] = "coordinator-state.bin";

Status WriteStateFile(const std::string& path, const proto::CoordinatorSnapshot& snapshot) {
  std::string payload;
  if (!snapshot.SerializeToString(&payload) || payload.size() > kMaxPayloadBytes) {
    return Status::Internal(path + ": the snapshot does not serialise within 64 MiB");
  }
  std::string file(kPrefixBytes, '\0');
  std::memcpy(file.data(), kMagic, sizeof kMagic);
  PutFixed32(static_cast<uint32_t>(payload.size()), file.data() + 8);
  PutFixed32(Crc(payload), file.data() + 12);
  file += payload;
  return WriteFileAtomically(path, file.data(), file.size());
}

Status ReadStateFile(const std::string& path, proto::CoordinatorSnapshot* snapshot) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::NotFound(path + ": no state file");
    return Status::Unavailable(path + ": cannot stat: " + std::strerror(errno));
  }
  std::string file;
  GAPTRAIN_RETURN_IF_ERROR(ReadFile(path, &file));
  if (file.size() < kPrefixBytes) {
    return Status::DataLoss(path + ": " + std::to_string(file.size()) +
                            " bytes, shorter than the 16-byte header (torn)");
  }
  if (std::memcmp(file.data(), kMagic, sizeof kMagic) != 0) {
    return Status::DataLoss(path + ": bad magic: not a coordinator state file");
  }
  const uint32_t length = GetFixed32(file.data() + 8);
  if (length > kMaxPayloadBytes || file.size() != kPrefixBytes + length) {
    return Status::DataLoss(path + ": payload length " + std::to_string(length) +
                            " does not match the file's " + std::to_string(file.size()) +
                            " bytes (torn)");
  }
  const std::string payload = file.substr(kPrefixBytes);
  if (Crc(payload) != GetFixed32(file.data() + 12)) {
    return Status::DataLoss(path + ": CRC mismatch (corrupt)");
  }
  proto::CoordinatorSnapshot parsed;
  if (!parsed.ParseFromString(payload)) {
    return Status::DataLoss(path + ": the payload does not parse as a CoordinatorSnapshot");
  }
  *snapshot = std::move(parsed);
  return Status::OK();
}

}  // namespace gaptrain
