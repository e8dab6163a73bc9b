#include "services/engine/gradient_view.h"

#include <algorithm>
#include <cstring>

#include "services/numeric/finite_scan.h"

namespace gaptrain {

const float* GradientView::Read(size_t begin, size_t end, Scratch* scratch) const {
  if (values_ != nullptr) return values_ + begin;
  const size_t n = end - begin;
  if (type_ == DType::kFloat32) {
    bytes_->CopyRange(begin * sizeof(float), n * sizeof(float), scratch->values);
  } else {
    bytes_->CopyRange(begin * sizeof(bf16_t), n * sizeof(bf16_t), scratch->wire);
    Bf16ToFloats(scratch->wire, n, scratch->values);
  }
  return scratch->values;
}

size_t GradientView::FindNonFinite() const {
  if (values_ != nullptr) return gaptrain::FindNonFinite(values_, size_);
  // Piece by piece in place; a value split between pieces is joined first.
  const size_t value_size = DTypeSize(type_);
  auto scan = [&](const uint8_t* bytes, size_t n) {
    return type_ == DType::kFloat32 ? FindNonFiniteFloatBytes(bytes, n)
                                    : FindNonFiniteBf16Bytes(bytes, n);
  };
  size_t index = 0;  // values checked so far
  size_t bad = size_;
  uint8_t split[sizeof(float)];
  size_t split_size = 0;
  bytes_->ForEachPiece([&](const uint8_t* data, size_t size) {
    if (bad != size_) return;
    if (split_size > 0) {
      const size_t take = std::min(value_size - split_size, size);
      std::memcpy(split + split_size, data, take);
      split_size += take;
      data += take;
      size -= take;
      if (split_size < value_size) return;
      if (scan(split, 1) == 0) {
        bad = index;
        return;
      }
      ++index;
      split_size = 0;
    }
    const size_t whole = size / value_size;
    const size_t found = scan(data, whole);
    if (found != whole) {
      bad = index + found;
      return;
    }
    index += whole;
    split_size = size - whole * value_size;
    std::memcpy(split, data + whole * value_size, split_size);
  });
  return bad;
}

float GradientView::At(size_t index) const {
  Scratch scratch;
  return Read(index, index + 1, &scratch)[0];
}

}  // namespace gaptrain
