// SlicedBytes: a run of bytes spread over pieces that someone else keeps
// alive (the slices of a received gRPC message), read in place instead of
// first being joined into one buffer. Pieces may have any size and
// alignment, so a multi-byte value may straddle two of them.

#ifndef GAPTRAIN_SERVICES_NUMERIC_SLICED_BYTES_H_
#define GAPTRAIN_SERVICES_NUMERIC_SLICED_BYTES_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gaptrain {

class SlicedBytes {
 public:
  // Adds `size` bytes at `data` after the current ones; empty pieces are
  // dropped. The bytes must stay valid while this object is read.
  void Append(const uint8_t* data, size_t size);
  // Adds all of `other`'s pieces.
  void Append(const SlicedBytes& other);

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // Copies all bytes to `out` (size() bytes).
  void CopyTo(void* out) const;
  // Copies bytes [offset, offset + n) to `out`; offset + n <= size().
  void CopyRange(size_t offset, size_t n, void* out) const;

  // Calls fn(data, size) for each piece, in order.
  template <class Fn>
  void ForEachPiece(Fn&& fn) const {
    for (const Piece& piece : pieces_) fn(piece.data, piece.size);
  }

 private:
  struct Piece {
    const uint8_t* data;
    size_t size;
    size_t offset;  // of its first byte within the whole run
  };
  // The piece that holds byte `offset` (< size()).
  std::vector<Piece>::const_iterator PieceAt(size_t offset) const;

  std::vector<Piece> pieces_;
  size_t size_ = 0;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_NUMERIC_SLICED_BYTES_H_
