// ByteSource: bytes read front to back, in chunks, from a stretch of a file
// or through gzip from another source. The image checks read a 260 MiB
// archive and inflate its layers this way without holding them in memory.
//
// What the caller may rely on:
//   - Read fills up to `capacity` bytes and sets *got; *got == 0 with an OK
//     status means the end. A short read is not the end.
//   - Errors name the path (or the source the gzip reads) and the reason:
//     NOT_FOUND for a missing file, OUT_OF_RANGE for a stretch beyond the
//     end of the file, DATA_LOSS for a file that ends early or a corrupt or
//     truncated gzip stream (zlib's reason), UNAVAILABLE for an I/O error.
// Not thread-safe.

#ifndef GAPTRAIN_IMAGE_BYTE_SOURCE_H_
#define GAPTRAIN_IMAGE_BYTE_SOURCE_H_

#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "services/base/status.h"

namespace gaptrain {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual Status Read(char* buffer, size_t capacity, size_t* got) = 0;
  // For messages: "archive.tar[1024, +300)", "gzip of ...".
  virtual std::string name() const = 0;
};

// `length` bytes of the file at `path` from `offset`, or the whole file.
class FileSource : public ByteSource {
 public:
  static Status Open(const std::string& path, std::unique_ptr<FileSource>* source);
  static Status OpenRange(const std::string& path, uint64_t offset, uint64_t length,
                          std::unique_ptr<FileSource>* source);
  ~FileSource() override;
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;

  Status Read(char* buffer, size_t capacity, size_t* got) override;
  std::string name() const override { return name_; }

 private:
  FileSource(int fd, std::string name, uint64_t offset, uint64_t length)
      : fd_(fd), name_(std::move(name)), position_(offset), end_(offset + length) {}

  int fd_;
  std::string name_;
  uint64_t position_;
  uint64_t end_;
};

// The decompressed bytes of the gzip stream (one or more members) that
// `compressed` holds; `compressed` must outlive it.
class GzipSource : public ByteSource {
 public:
  static Status Open(ByteSource* compressed, std::unique_ptr<GzipSource>* source);
  ~GzipSource() override;
  GzipSource(const GzipSource&) = delete;
  GzipSource& operator=(const GzipSource&) = delete;

  Status Read(char* buffer, size_t capacity, size_t* got) override;
  std::string name() const override { return "gzip of " + compressed_->name(); }

 private:
  explicit GzipSource(ByteSource* compressed);

  ByteSource* compressed_;
  z_stream stream_{};
  std::vector<char> input_;
  bool input_ended_ = false;
  bool member_ended_ = false;  // between members, or after the last one
  uint64_t produced_ = 0;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_IMAGE_BYTE_SOURCE_H_
