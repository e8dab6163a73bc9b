#include "services/numeric/sliced_bytes.h"

#include <algorithm>
#include <cstring>

namespace gaptrain {

void SlicedBytes::Append(const uint8_t* data, size_t size) {
  if (size == 0) return;
  pieces_.push_back({data, size, size_});
  size_ += size;
}

void SlicedBytes::Append(const SlicedBytes& other) {
  for (const Piece& piece : other.pieces_) Append(piece.data, piece.size);
}

void SlicedBytes::CopyTo(void* out) const {
  uint8_t* p = static_cast<uint8_t*>(out);
  for (const Piece& piece : pieces_) {
    std::memcpy(p, piece.data, piece.size);
    p += piece.size;
  }
}

std::vector<SlicedBytes::Piece>::const_iterator SlicedBytes::PieceAt(size_t offset) const {
  // The last piece that starts at or before `offset`.
  auto it = std::upper_bound(pieces_.begin(), pieces_.end(), offset,
                             [](size_t o, const Piece& piece) { return o < piece.offset; });
  return --it;
}

void SlicedBytes::CopyRange(size_t offset, size_t n, void* out) const {
  if (n == 0) return;
  auto it = PieceAt(offset);
  uint8_t* p = static_cast<uint8_t*>(out);
  size_t skip = offset - it->offset;
  while (n > 0) {
    const size_t take = std::min(n, it->size - skip);
    std::memcpy(p, it->data + skip, take);
    p += take;
    n -= take;
    skip = 0;
    ++it;
  }
}

}  // namespace gaptrain
