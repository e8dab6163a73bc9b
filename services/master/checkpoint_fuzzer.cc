// Fuzz target: checkpoint files (checkpoint.h): header, lengths, CRC,
// buffers. Input: byte 0 is a mode, the rest is the file. With bit 0 of the
// mode set the CRC is recomputed over the file first (when it is long
// enough to hold one), so that the fuzzer gets past the checksum to the
// header and the buffers behind it. Contract:
//   - a torn, corrupt or foreign file is DATA_LOSS with a message, never a
//     crash and never an allocation beyond what the file holds;
//   - on rejection *store and *meta are left exactly as they were;
//   - an accepted file holds a consistent store (every buffer P values of
//     its dtype) that WriteCheckpoint writes back and ReadCheckpoint reads
//     again to the same bits.

#include <zlib.h>

#include <google/protobuf/stubs/logging.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "services/engine/parameter_store.h"
#include "services/master/checkpoint.h"
#include "services/testing/fuzz_contract.h"

namespace gaptrain {
namespace {

bool SameBits(const void* a, const void* b, size_t n) { return n == 0 || std::memcmp(a, b, n) == 0; }

bool SameStore(const ParameterStore& a, const ParameterStore& b) {
  if (a.layout() != b.layout() || a.version() != b.version()) return false;
  if (!SameBits(a.params(), b.params(), a.size() * sizeof(float))) return false;
  if (a.scalars().size() != b.scalars().size()) return false;
  for (const auto& [name, value] : a.scalars()) {
    auto it = b.scalars().find(name);
    if (it == b.scalars().end() || !SameBits(&value, &it->second, sizeof value)) return false;
  }
  if (a.buffers().size() != b.buffers().size()) return false;
  for (const auto& [name, buffer] : a.buffers()) {
    const FlatBuffer* other = b.buffer(name);
    if (other == nullptr || other->dtype() != buffer.dtype() ||
        other->bytes() != buffer.bytes() ||
        !SameBits(other->data(), buffer.data(), buffer.bytes())) {
      return false;
    }
  }
  return true;
}

bool SameMeta(const CheckpointMeta& a, const CheckpointMeta& b) {
  return a.job_name == b.job_name && a.rule == b.rule && a.created_unix_ms == b.created_unix_ms &&
         a.workers == b.workers;
}

void CheckAccepted(const ParameterStore& store, const CheckpointMeta& meta) {
  FuzzExpect(store.size() > 0, "accepted a store without parameters");
  for (const auto& [name, buffer] : store.buffers()) {
    FuzzExpect(buffer.size() == store.size(), "buffer " + name + " does not hold P values");
  }
  const std::string again = FuzzScratchPath("again.gtc");
  Status written = WriteCheckpoint(store, meta, again);
  FuzzExpect(written.ok(), "an accepted checkpoint does not write back: " + written.ToString());
  std::unique_ptr<ParameterStore> reread;
  CheckpointMeta reread_meta;
  Status read = ReadCheckpoint(again, &reread, &reread_meta);
  FuzzExpect(read.ok(), "a written checkpoint does not read back: " + read.ToString());
  FuzzExpect(SameStore(store, *reread), "the store changed through a write and read");
  FuzzExpect(SameMeta(meta, reread_meta), "the metadata changed through a write and read");
}

}  // namespace
}  // namespace gaptrain

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gaptrain;
  // Protobuf logs every invalid UTF-8 string it meets; rejections are
  // checked here, not read from logs.
  static const google::protobuf::LogSilencer quiet;
  if (size == 0) return 0;
  std::string file(reinterpret_cast<const char*>(data) + 1, size - 1);
  // The CRC sits before the 8-byte end magic and covers all before it.
  constexpr size_t kTrailer = 4 + 8;
  if ((data[0] & 1) != 0 && file.size() >= 24 + kTrailer) {
    const size_t covered = file.size() - kTrailer;
    const uint32_t crc = static_cast<uint32_t>(
        crc32_z(0, reinterpret_cast<const Bytef*>(file.data()), covered));
    std::memcpy(&file[covered], &crc, sizeof crc);  // little-endian hosts only, as the format
  }
  const std::string path = FuzzScratchPath("input.gtc");
  FuzzWriteFile(path, file.data(), file.size());

  // What a caller held before: must survive a rejection untouched.
  ParameterLayout layout;
  FuzzExpect(layout.Add("w", {3}).ok(), "layout");
  auto before = std::make_unique<ParameterStore>(layout);
  const ParameterStore* before_address = before.get();
  before->set_version(17);
  CheckpointMeta meta;
  meta.job_name = "unchanged";
  meta.workers = {7};
  const CheckpointMeta meta_before = meta;

  std::unique_ptr<ParameterStore> store = std::move(before);
  Status read = ReadCheckpoint(path, &store, &meta);
  if (!read.ok()) {
    FuzzExpectRejection(read, {Status::Code::kDataLoss}, "ReadCheckpoint");
    FuzzExpect(store.get() == before_address && store->version() == 17,
               "ReadCheckpoint replaced the store on rejection");
    FuzzExpect(SameMeta(meta, meta_before), "ReadCheckpoint changed the metadata on rejection");
    return 0;
  }
  FuzzExpect(store != nullptr && store.get() != before_address, "accepted without a new store");
  CheckAccepted(*store, meta);
  return 0;
}
