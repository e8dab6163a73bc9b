#include "image/tar_reader.h"

#include <algorithm>
#include <cstring>
#include <memory>

namespace gaptrain {
namespace {

constexpr size_t kBlock = 512;
constexpr size_t kChunk = 1 << 20;
// Extended headers hold names and a few numbers; anything larger is damage.
constexpr uint64_t kMaxExtendedHeader = 1 << 20;

// A numeric header field: octal digits (space or NUL padded), or GNU's
// base-256 when the first byte has its top bit set.
bool ParseNumber(const char* field, size_t width, uint64_t* value) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(field);
  uint64_t v = 0;
  if (bytes[0] & 0x80) {
    if (bytes[0] != 0x80) return false;  // negative, or too large for 64 bits
    for (size_t i = 1; i < width; ++i) {
      if (v >> 56) return false;
      v = (v << 8) | bytes[i];
    }
    *value = v;
    return true;
  }
  size_t i = 0;
  while (i < width && field[i] == ' ') ++i;
  bool digits = false;
  for (; i < width && field[i] >= '0' && field[i] <= '7'; ++i) {
    if (v >> 61) return false;
    v = v * 8 + static_cast<uint64_t>(field[i] - '0');
    digits = true;
  }
  for (; i < width; ++i) {
    if (field[i] != ' ' && field[i] != '\0') return false;
  }
  *value = digits ? v : 0;
  return true;
}

std::string Field(const char* field, size_t width) {
  return std::string(field, strnlen(field, width));
}

bool HeaderChecksumMatches(const char* block) {
  uint64_t stored = 0;
  if (!ParseNumber(block + 148, 8, &stored)) return false;
  uint64_t unsigned_sum = 0;
  int64_t signed_sum = 0;
  for (size_t i = 0; i < kBlock; ++i) {
    const bool in_field = i >= 148 && i < 156;
    const unsigned char u = in_field ? ' ' : static_cast<unsigned char>(block[i]);
    const signed char s = in_field ? ' ' : static_cast<signed char>(block[i]);
    unsigned_sum += u;
    signed_sum += s;
  }
  // Some old tars summed signed bytes.
  return stored == unsigned_sum || static_cast<int64_t>(stored) == signed_sum;
}

// Pax records, "LEN KEY=VALUE\n" each, LEN counting the whole record.
bool ParsePax(const std::string& data, std::vector<std::pair<std::string, std::string>>* records) {
  size_t at = 0;
  while (at < data.size()) {
    const size_t space = data.find(' ', at);
    if (space == std::string::npos || space == at) return false;
    uint64_t length = 0;
    for (size_t i = at; i < space; ++i) {
      if (data[i] < '0' || data[i] > '9' || length > data.size()) return false;
      length = length * 10 + static_cast<uint64_t>(data[i] - '0');
    }
    if (length <= space - at + 1 || at + length > data.size() || data[at + length - 1] != '\n') {
      return false;
    }
    const std::string record = data.substr(space + 1, at + length - 1 - (space + 1));
    const size_t equals = record.find('=');
    if (equals == std::string::npos || equals == 0) return false;
    records->emplace_back(record.substr(0, equals), record.substr(equals + 1));
    at += length;
  }
  return true;
}

bool ParseDecimal(const std::string& text, uint64_t* value) {
  if (text.empty() || text.size() > 19) return false;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *value = v;
  return true;
}

bool HasData(char type) {
  return type != TarEntry::kHardLink && type != TarEntry::kSymlink &&
         type != TarEntry::kCharDevice && type != TarEntry::kBlockDevice &&
         type != TarEntry::kDirectory && type != TarEntry::kFifo;
}

}  // namespace

std::string TarReader::Where() const {
  return source_->name() + ": entry " + std::to_string(entry_index_) + " at byte " +
         std::to_string(position_);
}

Status TarReader::ReadExactly(char* buffer, size_t size, const char* what) {
  size_t done = 0;
  while (done < size) {
    size_t got = 0;
    GAPTRAIN_RETURN_IF_ERROR(source_->Read(buffer + done, size - done, &got));
    if (got == 0) {
      return Status::DataLoss(Where() + ": the archive ends inside " + what);
    }
    done += got;
    position_ += got;
  }
  return Status::OK();
}

Status TarReader::Skip(uint64_t size) {
  if (chunk_.size() < kChunk) chunk_.resize(kChunk);
  while (size > 0) {
    const size_t step = static_cast<size_t>(std::min<uint64_t>(size, kChunk));
    GAPTRAIN_RETURN_IF_ERROR(ReadExactly(chunk_.data(), step, "an entry's data"));
    size -= step;
  }
  return Status::OK();
}

Status TarReader::ReadBlock(char* block, bool* end_of_source) {
  *end_of_source = false;
  size_t got = 0;
  GAPTRAIN_RETURN_IF_ERROR(source_->Read(block, kBlock, &got));
  if (got == 0) {
    *end_of_source = true;
    return Status::OK();
  }
  position_ += got;
  if (got < kBlock) {
    GAPTRAIN_RETURN_IF_ERROR(ReadExactly(block + got, kBlock - got, "a header"));
  }
  return Status::OK();
}

Status TarReader::Next(TarEntry* entry, bool* end) {
  *end = false;
  if (finished_) {
    *end = true;
    return Status::OK();
  }
  GAPTRAIN_RETURN_IF_ERROR(Skip(data_left_ + padding_));
  data_left_ = 0;
  padding_ = 0;

  std::string long_name, long_link;
  std::vector<std::pair<std::string, std::string>> pax;
  char block[kBlock];
  for (;;) {
    const uint64_t header_at = position_;
    bool end_of_source = false;
    GAPTRAIN_RETURN_IF_ERROR(ReadBlock(block, &end_of_source));
    if (end_of_source) {
      return Status::DataLoss(Where() + ": the archive ends without its end-of-archive blocks");
    }
    if (std::all_of(block, block + kBlock, [](char c) { return c == '\0'; })) {
      finished_ = true;
      *end = true;
      return Status::OK();
    }
    if (!HeaderChecksumMatches(block)) {
      return Status::DataLoss(Where() + ": the header at byte " + std::to_string(header_at) +
                              " has a wrong checksum (not a tar archive, or damaged)");
    }
    uint64_t size = 0;
    if (!ParseNumber(block + 124, 12, &size)) {
      return Status::DataLoss(Where() + ": the header's size field is malformed");
    }
    const char type = block[156] == '\0' ? TarEntry::kFile : block[156];
    if (type == 'x' || type == 'g' || type == 'L' || type == 'K') {
      if (size > kMaxExtendedHeader) {
        return Status::DataLoss(Where() + ": an extended header of " + std::to_string(size) +
                                " bytes (at most " + std::to_string(kMaxExtendedHeader) + ")");
      }
      std::string data(static_cast<size_t>(size), '\0');
      GAPTRAIN_RETURN_IF_ERROR(ReadExactly(data.data(), data.size(), "an extended header"));
      GAPTRAIN_RETURN_IF_ERROR(Skip((kBlock - size % kBlock) % kBlock));
      if (type == 'L') long_name = data.substr(0, strnlen(data.c_str(), data.size()));
      if (type == 'K') long_link = data.substr(0, strnlen(data.c_str(), data.size()));
      if (type == 'x' && !ParsePax(data, &pax)) {
        return Status::DataLoss(Where() + ": a malformed pax extended header");
      }
      continue;  // 'g' (global) holds nothing an entry needs
    }

    TarEntry e;
    e.type = type;
    e.name = Field(block, 100);
    const bool ustar = std::memcmp(block + 257, "ustar", 5) == 0;
    const std::string prefix = ustar ? Field(block + 345, 155) : "";
    if (!prefix.empty() && std::memcmp(block + 257, "ustar\0", 6) == 0) {
      e.name = prefix + "/" + e.name;  // POSIX ustar; GNU uses that space otherwise
    }
    e.link_name = Field(block + 157, 100);
    uint64_t mode = 0;
    if (!ParseNumber(block + 100, 8, &mode) || !ParseNumber(block + 108, 8, &e.uid) ||
        !ParseNumber(block + 116, 8, &e.gid)) {
      return Status::DataLoss(Where() + ": the header's mode, uid or gid field is malformed");
    }
    e.mode = static_cast<uint32_t>(mode & 07777);
    if (!long_name.empty()) e.name = long_name;
    if (!long_link.empty()) e.link_name = long_link;
    for (const auto& [key, value] : pax) {
      if (key == "path") e.name = value;
      if (key == "linkpath") e.link_name = value;
      uint64_t* number = key == "size" ? &size : key == "uid" ? &e.uid : key == "gid" ? &e.gid
                                                                                       : nullptr;
      if (number != nullptr && !ParseDecimal(value, number)) {
        return Status::DataLoss(Where() + ": pax " + key + " '" + value + "' is not a number");
      }
    }
    e.size = HasData(type) ? size : 0;
    e.offset = position_;
    data_left_ = e.size;
    padding_ = (kBlock - e.size % kBlock) % kBlock;
    ++entry_index_;
    *entry = std::move(e);
    return Status::OK();
  }
}

Status TarReader::ReadData(const std::function<void(const char* data, size_t size)>& sink) {
  if (chunk_.size() < kChunk) chunk_.resize(kChunk);
  while (data_left_ > 0) {
    const size_t step = static_cast<size_t>(std::min<uint64_t>(data_left_, kChunk));
    GAPTRAIN_RETURN_IF_ERROR(ReadExactly(chunk_.data(), step, "an entry's data"));
    data_left_ -= step;
    sink(chunk_.data(), step);
  }
  return Status::OK();
}

std::string NormalizeTarName(std::string name) {
  while (name.rfind("./", 0) == 0) name.erase(0, 2);
  while (!name.empty() && name.back() == '/') name.pop_back();
  if (name == ".") name.clear();
  return name;
}

Status ForEachTarEntry(const std::string& path,
                       const std::function<Status(const TarEntry&, TarReader*)>& visit) {
  std::unique_ptr<FileSource> file;
  GAPTRAIN_RETURN_IF_ERROR(FileSource::Open(path, &file));
  TarReader tar(file.get());
  for (;;) {
    TarEntry entry;
    bool end = false;
    GAPTRAIN_RETURN_IF_ERROR(tar.Next(&entry, &end));
    if (end) return Status::OK();
    GAPTRAIN_RETURN_IF_ERROR(visit(entry, &tar));
  }
}

}  // namespace gaptrain
