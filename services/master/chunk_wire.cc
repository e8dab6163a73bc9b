#include "services/master/chunk_wire.h"

#include <grpc/slice.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "services/numeric/bfloat16.h"

namespace gaptrain {
namespace {

// Protobuf wire types.
constexpr uint32_t kVarint = 0;
constexpr uint32_t kFixed64 = 1;
constexpr uint32_t kLengthDelimited = 2;
constexpr uint32_t kFixed32 = 5;

// Reads a message spread over slices.
class SliceReader {
 public:
  explicit SliceReader(const std::vector<grpc::Slice>& slices) : slices_(slices) { Skip(0); }

  bool done() const { return index_ == slices_.size(); }

  bool ReadByte(uint8_t* b) {
    if (done()) return false;
    *b = slices_[index_].begin()[pos_];
    Advance(1);
    return true;
  }

  // At most `max_bytes` bytes (10 hold 64 bits).
  bool ReadVarint(uint64_t* v, int max_bytes = 10) {
    *v = 0;
    for (int shift = 0; shift < 7 * max_bytes; shift += 7) {
      uint8_t b;
      if (!ReadByte(&b)) return false;
      *v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;
  }

  bool ReadFixed32(uint32_t* v) {
    uint8_t b[4];
    for (uint8_t& x : b) {
      if (!ReadByte(&x)) return false;
    }
    *v = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<uint32_t>(b[3]) << 24);
    return true;
  }

  // Takes `n` bytes as views into the slices.
  bool Take(size_t n, SlicedBytes* out) {
    while (n > 0) {
      if (done()) return false;
      size_t available = slices_[index_].size() - pos_;
      size_t take = std::min(available, n);
      if (out != nullptr) out->Append(slices_[index_].begin() + pos_, take);
      Advance(take);
      n -= take;
    }
    return true;
  }

 private:
  void Advance(size_t n) {
    pos_ += n;
    Skip(0);
  }
  // Moves past exhausted (and empty) slices.
  void Skip(size_t) {
    while (index_ < slices_.size() && pos_ >= slices_[index_].size()) {
      pos_ = 0;
      ++index_;
    }
  }

  const std::vector<grpc::Slice>& slices_;
  size_t index_ = 0;
  size_t pos_ = 0;
};

// Calls on_field(number, wire_type, varint, bytes) per field; skips others.
template <class OnVarint, class OnBytes, class OnFixed32>
Status ParseFields(const std::vector<grpc::Slice>& slices, OnVarint on_varint, OnBytes on_bytes,
                   OnFixed32 on_fixed32) {
  SliceReader reader(slices);
  while (!reader.done()) {
    // As protobuf reads them: a tag is a varint of at most 5 bytes and 32
    // bits (field numbers up to 2^29 - 1). Accepting more would accept
    // messages that other protobuf peers reject.
    uint64_t tag;
    if (!reader.ReadVarint(&tag, 5) || tag > UINT32_MAX) {
      return Status::InvalidArgument("malformed chunk: bad tag");
    }
    const uint32_t field = static_cast<uint32_t>(tag >> 3);
    const uint32_t type = static_cast<uint32_t>(tag & 7);
    if (field == 0) return Status::InvalidArgument("malformed chunk: field number 0");
    if (type == kVarint) {
      uint64_t v;
      if (!reader.ReadVarint(&v)) return Status::InvalidArgument("malformed chunk: bad varint");
      on_varint(field, v);
    } else if (type == kLengthDelimited) {
      uint64_t n;
      if (!reader.ReadVarint(&n)) return Status::InvalidArgument("malformed chunk: bad length");
      SlicedBytes* target = on_bytes(field);
      if (target != nullptr) *target = SlicedBytes();
      if (!reader.Take(n, target)) return Status::InvalidArgument("malformed chunk: truncated");
    } else if (type == kFixed32) {
      uint32_t v;
      if (!reader.ReadFixed32(&v)) return Status::InvalidArgument("malformed chunk: truncated");
      on_fixed32(field, v);
    } else if (type == kFixed64) {
      if (!reader.Take(8, nullptr)) return Status::InvalidArgument("malformed chunk: truncated");
    } else {
      return Status::InvalidArgument("malformed chunk: wire type " + std::to_string(type));
    }
  }
  return Status::OK();
}

void AppendVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// The tag and length that introduce a bytes field of `size` bytes.
std::string BytesFieldPrefix(uint32_t field, size_t size) {
  std::string prefix;
  AppendVarint((field << 3) | kLengthDelimited, &prefix);
  AppendVarint(size, &prefix);
  return prefix;
}

void ReleaseOwner(void* user_data) { delete static_cast<std::shared_ptr<const void>*>(user_data); }

void NoRelease(void*) {}

}  // namespace

void DecodeValues(const SlicedBytes& bytes, proto::WireType type, float* out) {
  if (type != proto::BFLOAT16) {
    bytes.CopyTo(out);
    return;
  }
  // Through a bounded bf16 block: the bytes may start at any alignment.
  constexpr size_t kBlock = 4096;
  bf16_t block[kBlock];
  const size_t n = bytes.size() / sizeof(bf16_t);
  for (size_t b0 = 0; b0 < n; b0 += kBlock) {
    const size_t count = std::min(n - b0, kBlock);
    bytes.CopyRange(b0 * sizeof(bf16_t), count * sizeof(bf16_t), block);
    Bf16ToFloats(block, count, out + b0);
  }
}

Status ParseParameterChunk(grpc::ByteBuffer* buffer, ReceivedParameterChunk* chunk) {
  chunk->slices.clear();
  chunk->header.Clear();
  chunk->values = SlicedBytes();
  if (!buffer->Dump(&chunk->slices).ok()) return Status::InvalidArgument("unreadable message");
  proto::ParameterChunk& h = chunk->header;
  // PushPull's outcome: small, parsed as a message. Protobuf merges every
  // occurrence of the field, so each one is parsed and must be valid. A
  // vector (empty: no allocation per chunk); ParseFields fills each
  // element before asking for the next.
  std::vector<SlicedBytes> pushes;
  GAPTRAIN_RETURN_IF_ERROR(ParseFields(
      chunk->slices,
      [&](uint32_t field, uint64_t v) {
        switch (field) {
          case 1: h.set_version(v); break;
          case 2: h.set_total_values(v); break;
          case 3: h.set_offset(v); break;
          case 4: h.set_wire_type(static_cast<proto::WireType>(v)); break;
          case 6: h.set_incarnation(v); break;
        }
      },
      [&](uint32_t field) -> SlicedBytes* {
        if (field == 5) return &chunk->values;
        if (field != 7) return nullptr;
        return &pushes.emplace_back();
      },
      [](uint32_t, uint32_t) {}));
  for (const SlicedBytes& push : pushes) {
    std::string bytes(push.size(), '\0');
    push.CopyTo(bytes.data());
    if (!h.mutable_push()->MergeFromString(bytes)) {
      return Status::InvalidArgument("malformed chunk: push is not a PushResponse");
    }
  }
  return Status::OK();
}

Status ParseGradientChunk(grpc::ByteBuffer* buffer, ReceivedGradientChunk* chunk) {
  chunk->slices.clear();
  chunk->header.Clear();
  chunk->values = SlicedBytes();
  chunk->echo = SlicedBytes();
  if (!buffer->Dump(&chunk->slices).ok()) return Status::InvalidArgument("unreadable message");
  proto::GradientChunk& h = chunk->header;
  return ParseFields(
      chunk->slices,
      [&](uint32_t field, uint64_t v) {
        switch (field) {
          case 1: h.set_worker_id(static_cast<uint32_t>(v)); break;
          case 2: h.set_base_version(v); break;
          case 3: h.set_total_values(v); break;
          case 4: h.set_offset(v); break;
          case 5: h.set_wire_type(static_cast<proto::WireType>(v)); break;
          case 7: h.set_echo_type(static_cast<proto::WireType>(v)); break;
        }
      },
      [&](uint32_t field) -> SlicedBytes* {
        return field == 6 ? &chunk->values : field == 8 ? &chunk->echo : nullptr;
      },
      [&](uint32_t field, uint32_t v) {
        if (field == 9) {
          float f;
          std::memcpy(&f, &v, sizeof f);
          h.set_loss(f);
        }
      });
}

grpc::ByteBuffer ParameterChunkBuffer(const proto::ParameterChunk& header,
                                      const grpc::Slice& values) {
  std::string head = header.SerializeAsString();
  head += BytesFieldPrefix(5, values.size());
  grpc::Slice parts[2] = {grpc::Slice(head), values};
  return grpc::ByteBuffer(parts, values.size() > 0 ? 2 : 1);
}

grpc::ByteBuffer GradientChunkBuffer(const proto::GradientChunk& header, const grpc::Slice& values,
                                     const grpc::Slice* echo) {
  std::string head = header.SerializeAsString();
  head += BytesFieldPrefix(6, values.size());
  std::vector<grpc::Slice> parts = {grpc::Slice(head), values};
  if (echo != nullptr && echo->size() > 0) {
    parts.push_back(grpc::Slice(BytesFieldPrefix(8, echo->size())));
    parts.push_back(*echo);
  }
  return grpc::ByteBuffer(parts.data(), parts.size());
}

grpc::Slice SliceOf(const void* data, size_t size, std::shared_ptr<const void> owner) {
  auto* keep = new std::shared_ptr<const void>(std::move(owner));
  return grpc::Slice(const_cast<void*>(data), size, ReleaseOwner, keep);
}

grpc::Slice BorrowedSlice(const void* data, size_t size) {
  return grpc::Slice(const_cast<void*>(data), size, NoRelease, nullptr);
}

grpc::Slice NewSlice(size_t size, uint8_t** data) {
  grpc_slice s = grpc_slice_malloc(size);
  *data = GRPC_SLICE_START_PTR(s);
  return grpc::Slice(s, grpc::Slice::STEAL_REF);
}

}  // namespace gaptrain
