// ReadFileMaybeGzip: reads a whole file into memory, decompressing it when it
// is gzip (one or more concatenated members) and copying it unchanged when it
// is not, so a dataset directory may hold either form of a file.
//
// Errors name the path and say what failed:
//   NOT_FOUND       the file does not exist;
//   INVALID_ARGUMENT the path is a directory or not a regular file;
//   DATA_LOSS       a corrupt or truncated gzip stream, with zlib's reason
//                   ("invalid distance too far back", "incorrect data
//                   check", "unexpected end of file", ...), the compressed
//                   offset zlib had consumed up to, and the uncompressed
//                   offset: exact for a truncated stream, otherwise a lower
//                   bound within 1.5 MiB (zlib drops the output of a read
//                   call that fails, and this reads 1 MiB per call). zlib
//                   notices corruption where it becomes visible, often only
//                   at the CRC-32 that ends a member, so the offsets say where
//                   the error was noticed, not where the bad byte is;
//   UNAVAILABLE     an I/O error from the operating system.

#ifndef GAPTRAIN_SERVICES_LEARN_GZIP_FILE_H_
#define GAPTRAIN_SERVICES_LEARN_GZIP_FILE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "services/base/status.h"

namespace gaptrain {

// Replaces *contents with the (decompressed) bytes of `path`. On error
// *contents is left empty.
Status ReadFileMaybeGzip(const std::string& path, std::string* contents);
Status ReadFileMaybeGzip(const std::string& path, std::vector<uint8_t>* contents);

// The first `max_bytes` (decompressed) bytes of `path`, or all of it when it
// is shorter: a file's header without decompressing the rest.
Status ReadFileHeadMaybeGzip(const std::string& path, size_t max_bytes,
                             std::string* contents);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_LEARN_GZIP_FILE_H_
