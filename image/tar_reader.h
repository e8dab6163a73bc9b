// TarReader: the entries of a tar archive read front to back from a
// ByteSource: ustar with its name prefix, GNU long names and links ('L',
// 'K') and base-256 numbers, and POSIX pax extended headers (path,
// linkpath, size, uid, gid; global headers are skipped). That covers what
// GNU tar, mmdebstrap and Go's archive/tar (umoci, Docker) write.
//
// What the caller may rely on:
//   - Next() yields each entry with the extended headers before it applied;
//     it skips whatever of the previous entry's data was not read.
//   - ReadData() passes the current entry's data to `sink` in chunks, once.
//   - Every header's checksum is verified. Errors (DATA_LOSS) name the
//     source, the entry's index and byte offset and what is wrong: a bad
//     checksum, a malformed number, an archive that ends inside an entry or
//     without its two zero blocks.
// Not thread-safe; the source must outlive the reader.

#ifndef GAPTRAIN_IMAGE_TAR_READER_H_
#define GAPTRAIN_IMAGE_TAR_READER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "image/byte_source.h"
#include "services/base/status.h"

namespace gaptrain {

struct TarEntry {
  // Type flags of the ustar format.
  static constexpr char kFile = '0';
  static constexpr char kHardLink = '1';
  static constexpr char kSymlink = '2';
  static constexpr char kCharDevice = '3';
  static constexpr char kBlockDevice = '4';
  static constexpr char kDirectory = '5';
  static constexpr char kFifo = '6';

  std::string name;       // as stored: "./usr/bin/env", "blobs/sha256/ab12..."
  char type = kFile;      // '\0' (old tar) is reported as kFile
  uint32_t mode = 0;      // permission and set-id bits (07777)
  uint64_t uid = 0;
  uint64_t gid = 0;
  uint64_t size = 0;      // bytes of data (0 for all but files)
  std::string link_name;  // for links
  uint64_t offset = 0;    // of the entry's data in the source
};

// A member's name as a path relative to the archive's root, the same
// however the writer spelled it: "./blobs/" -> "blobs", "./" -> "".
std::string NormalizeTarName(std::string name);

class TarReader {
 public:
  explicit TarReader(ByteSource* source) : source_(source) {}

  // The next entry into *entry, or *end = true after the last one.
  Status Next(TarEntry* entry, bool* end);

  // The current entry's data, in chunks of at most 1 MiB.
  Status ReadData(const std::function<void(const char* data, size_t size)>& sink);

 private:
  Status ReadExactly(char* buffer, size_t size, const char* what);
  Status Skip(uint64_t size);
  Status ReadBlock(char* block, bool* end_of_source);
  std::string Where() const;

  ByteSource* source_;
  uint64_t position_ = 0;     // bytes consumed from the source
  uint64_t entry_index_ = 0;  // entries returned so far
  uint64_t data_left_ = 0;    // of the current entry
  uint64_t padding_ = 0;      // after the current entry's data
  bool finished_ = false;
  std::vector<char> chunk_;
};

// Reads the tar file at `path` front to back, calling `visit` with each
// entry and the reader (whose ReadData reads that entry's data, if `visit`
// wants it) until the archive ends: OK, or the first error of the file, the
// format or `visit`.
Status ForEachTarEntry(const std::string& path,
                       const std::function<Status(const TarEntry&, TarReader*)>& visit);

}  // namespace gaptrain

#endif  // GAPTRAIN_IMAGE_TAR_READER_H_
