#include "services/learn/dataset.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <utility>

#include "services/learn/gzip_file.h"
#include "services/learn/inflated_cache.h"

namespace gaptrain {
namespace {

struct FormatName {
  DatasetFormat format;
  const char* name;
};

constexpr FormatName kFormatNames[] = {
    {DatasetFormat::kMnistIdx, "mnist-idx"},
    {DatasetFormat::kCifar10Bin, "cifar10-bin"},
};

constexpr uint32_t kIdxImagesMagic = 2051;  // 0x00000803: ubyte, 3 dims
constexpr uint32_t kIdxLabelsMagic = 2049;  // 0x00000801: ubyte, 1 dim
constexpr size_t kIdxImagesHeader = 16;
constexpr size_t kIdxLabelsHeader = 8;
// Larger images than this are a corrupt header, not a dataset.
constexpr uint64_t kMaxIdxImageBytes = uint64_t{1} << 31;

constexpr int64_t kCifarSide = 32;
constexpr int64_t kCifarChannels = 3;
constexpr size_t kCifarImageBytes = kCifarChannels * kCifarSide * kCifarSide;  // 3072
constexpr size_t kCifarRecordBytes = 1 + kCifarImageBytes;                      // 3073
constexpr int kCifarTrainBatches = 5;

std::string Num(uint64_t v) { return std::to_string(v); }

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (dir.empty() || dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

bool IsRegularFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

Status CheckDirectory(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    return Status::NotFound(dir + ": dataset directory not found (" +
                            std::strerror(errno) + ")");
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument(dir + ": dataset path is not a directory");
  }
  return Status::OK();
}

// Bytes: a std::string or a std::vector<uint8_t> holding a file.
template <class Bytes>
uint32_t ReadBigEndian32(const Bytes& s, size_t offset) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + offset;
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) |
         uint32_t{p[3]};
}

// Every label of `count` one-byte labels starting at contents[offset] must be
// below Dataset::kNumClasses; `record_bytes` is the stride between labels.
// The error gives the record's index within the file and its offset.
template <class Bytes>
Status CheckLabels(const std::string& path, const Bytes& contents, size_t offset,
                   size_t count, size_t record_bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(contents.data());
  for (size_t i = 0; i < count; ++i) {
    size_t at = offset + i * record_bytes;
    if (p[at] >= Dataset::kNumClasses) {
      return Status::InvalidArgument(
          path + ": label " + Num(p[at]) + " of record " + Num(i) +
          " at offset " + Num(at) + " is out of range [0, " +
          Num(Dataset::kNumClasses) + ")");
    }
  }
  return Status::OK();
}

// Reads a big data file (images, CIFAR batches) through the inflate cache
// when there is one, counting what the cache did.
Status ReadDataFile(const std::string& path, const std::string& cache_dir,
                    std::vector<uint8_t>* contents, DatasetCacheUse* use) {
  if (cache_dir.empty()) return ReadFileMaybeGzip(path, contents);
  InflatedCacheOutcome outcome;
  GAPTRAIN_RETURN_IF_ERROR(ReadFileInflatedCached(path, cache_dir, contents, &outcome));
  switch (outcome.kind) {
    case InflatedCacheOutcome::Kind::kHit: ++use->files_from_cache; break;
    case InflatedCacheOutcome::Kind::kFilled: ++use->files_cached; break;
    case InflatedCacheOutcome::Kind::kBypassed:
      // A plain file has nothing to cache: only real problems are reported.
      if (use->bypassed.empty() && outcome.reason != kNotGzipReason) {
        use->bypassed = path + ": " + outcome.reason;
      }
      break;
  }
  return Status::OK();
}

// ---------------------------------------------------------------- MNIST IDX

// `dir`/`base`, or `dir`/`base`.gz when only that exists.
Status FindIdxFile(const std::string& dir, const std::string& base, std::string* path) {
  std::string plain = JoinPath(dir, base);
  if (IsRegularFile(plain)) {
    *path = plain;
    return Status::OK();
  }
  std::string gz = plain + ".gz";
  if (IsRegularFile(gz)) {
    *path = gz;
    return Status::OK();
  }
  return Status::NotFound(plain + "(.gz): file not found (neither " + base + " nor " +
                          base + ".gz is in " + dir + ")");
}

template <class Bytes>
Status CheckMagic(const std::string& path, const Bytes& contents, size_t header,
                  uint32_t expected, const char* what) {
  if (contents.size() < header) {
    return Status::InvalidArgument(path + ": truncated: expected a " + Num(header) +
                                   "-byte IDX header at offset 0, file has " +
                                   Num(contents.size()) + " bytes");
  }
  uint32_t magic = ReadBigEndian32(contents, 0);
  if (magic != expected) {
    return Status::InvalidArgument(path + ": bad magic number " + Num(magic) +
                                   " at offset 0 (expected " + Num(expected) + " for an IDX " +
                                   what + " file)");
  }
  return Status::OK();
}

template <class Bytes>
Status CheckPayload(const std::string& path, const Bytes& contents, size_t header,
                    uint64_t expected, const char* what) {
  uint64_t have = contents.size() - header;
  if (have == expected) return Status::OK();
  std::string m = path + ": " + (have < expected ? "truncated" : "size mismatch") +
                  ": expected " + Num(expected) + " bytes of " + what + " data at offset " +
                  Num(header) + ", file has " + Num(have);
  if (have > expected) m += " (" + Num(have - expected) + " trailing bytes)";
  return Status::InvalidArgument(m);
}

// An IDX images file's header: magic, then count, rows and cols, each
// checked.
template <class Bytes>
Status ReadIdxImagesHeader(const std::string& path, const Bytes& images, uint32_t* count,
                           uint32_t* rows, uint32_t* cols) {
  GAPTRAIN_RETURN_IF_ERROR(CheckMagic(path, images, kIdxImagesHeader, kIdxImagesMagic, "image"));
  *count = ReadBigEndian32(images, 4);
  *rows = ReadBigEndian32(images, 8);
  *cols = ReadBigEndian32(images, 12);
  if (*rows == 0 || *cols == 0) {
    return Status::InvalidArgument(path + ": image size " + Num(*rows) + "x" + Num(*cols) +
                                   " (offset 8) must be positive");
  }
  if (uint64_t{*rows} * *cols > kMaxIdxImageBytes) {
    return Status::InvalidArgument(path + ": image size " + Num(*rows) + "x" + Num(*cols) +
                                   " (offset 8) is implausibly large");
  }
  return Status::OK();
}

// An IDX labels file's header: magic, and as many labels as images.
Status CheckIdxLabelsHeader(const std::string& path, const std::string& labels, uint32_t count,
                            const std::string& images_path) {
  GAPTRAIN_RETURN_IF_ERROR(CheckMagic(path, labels, kIdxLabelsHeader, kIdxLabelsMagic, "label"));
  const uint32_t label_count = ReadBigEndian32(labels, 4);
  if (label_count != count) {
    return Status::InvalidArgument(path + ": label count " + Num(label_count) +
                                   " (offset 4) differs from the image count " + Num(count) +
                                   " of " + images_path);
  }
  return Status::OK();
}

Status NoImages(const std::string& images_path) {
  return Status::InvalidArgument(images_path + ": holds no images (count 0 at offset 4)");
}

// Reads and checks one IDX split: images (magic, dims, length) and labels
// (magic, length, range), and that both have the same count.
Status LoadIdxSplit(const std::string& dir, Split split, const std::string& cache_dir,
                    Dataset* out, DatasetCacheUse* use) {
  const std::string prefix = split == Split::kTrain ? "train" : "t10k";
  std::string images_path, labels_path;
  GAPTRAIN_RETURN_IF_ERROR(FindIdxFile(dir, prefix + "-images-idx3-ubyte", &images_path));
  GAPTRAIN_RETURN_IF_ERROR(FindIdxFile(dir, prefix + "-labels-idx1-ubyte", &labels_path));

  // The pixels stay in the buffer they were read into (the header is moved
  // out in place below): no second 47 MB copy for MNIST.
  std::vector<uint8_t> images;
  GAPTRAIN_RETURN_IF_ERROR(ReadDataFile(images_path, cache_dir, &images, use));
  uint32_t count = 0, rows = 0, cols = 0;
  GAPTRAIN_RETURN_IF_ERROR(ReadIdxImagesHeader(images_path, images, &count, &rows, &cols));
  GAPTRAIN_RETURN_IF_ERROR(CheckPayload(images_path, images, kIdxImagesHeader,
                                        uint64_t{count} * rows * cols, "pixel"));
  if (count == 0) return NoImages(images_path);

  std::string labels;
  GAPTRAIN_RETURN_IF_ERROR(ReadFileMaybeGzip(labels_path, &labels));
  GAPTRAIN_RETURN_IF_ERROR(CheckIdxLabelsHeader(labels_path, labels, count, images_path));
  GAPTRAIN_RETURN_IF_ERROR(CheckPayload(labels_path, labels, kIdxLabelsHeader, count, "label"));
  GAPTRAIN_RETURN_IF_ERROR(CheckLabels(labels_path, labels, kIdxLabelsHeader, count, 1));

  out->channels = 1;
  out->height = rows;
  out->width = cols;
  images.erase(images.begin(), images.begin() + kIdxImagesHeader);
  out->images = std::move(images);
  out->labels.assign(labels.begin() + kIdxLabelsHeader, labels.end());
  return Status::OK();
}

// ------------------------------------------------------------ CIFAR-10 binary

Status CifarFiles(const std::string& dir, Split split, std::vector<std::string>* paths) {
  paths->clear();
  if (split == Split::kTest) {
    std::string path = JoinPath(dir, "test_batch.bin");
    if (!IsRegularFile(path)) return Status::NotFound(path + ": file not found");
    paths->push_back(path);
    return Status::OK();
  }
  for (int b = 1; b <= kCifarTrainBatches; ++b) {
    std::string path = JoinPath(dir, "data_batch_" + std::to_string(b) + ".bin");
    if (IsRegularFile(path)) paths->push_back(path);
  }
  if (paths->empty()) {
    return Status::NotFound(JoinPath(dir, "data_batch_1.bin") +
                            ": file not found (no CIFAR-10 train batch data_batch_1.bin .. "
                            "data_batch_5.bin is in " + dir + ")");
  }
  return Status::OK();
}

Status LoadCifarSplit(const std::string& dir, Split split, const std::string& cache_dir,
                      Dataset* out, DatasetCacheUse* use) {
  std::vector<std::string> paths;
  GAPTRAIN_RETURN_IF_ERROR(CifarFiles(dir, split, &paths));
  out->channels = kCifarChannels;
  out->height = kCifarSide;
  out->width = kCifarSide;
  std::vector<uint8_t> contents;
  for (const std::string& path : paths) {
    GAPTRAIN_RETURN_IF_ERROR(ReadDataFile(path, cache_dir, &contents, use));
    const size_t records = contents.size() / kCifarRecordBytes;
    const size_t partial = contents.size() % kCifarRecordBytes;
    if (partial != 0) {
      return Status::InvalidArgument(
          path + ": size " + Num(contents.size()) + " is not a multiple of the " +
          Num(kCifarRecordBytes) + "-byte record: partial record " + Num(records) +
          " at offset " + Num(records * kCifarRecordBytes) + " has " + Num(partial) + " bytes");
    }
    if (records == 0) return Status::InvalidArgument(path + ": holds no records (empty file)");
    GAPTRAIN_RETURN_IF_ERROR(CheckLabels(path, contents, 0, records, kCifarRecordBytes));
    const size_t base = out->labels.size();
    if (base + records > UINT32_MAX) {
      return Status::InvalidArgument(path + ": more than 2^32-1 images in the split");
    }
    out->labels.resize(base + records);
    out->images.resize((base + records) * kCifarImageBytes);
    const auto* rec = reinterpret_cast<const uint8_t*>(contents.data());
    uint8_t* dst = out->images.data() + base * kCifarImageBytes;
    for (size_t i = 0; i < records; ++i, rec += kCifarRecordBytes, dst += kCifarImageBytes) {
      out->labels[base + i] = rec[0];
      std::memcpy(dst, rec + 1, kCifarImageBytes);  // already R, G, B planes
    }
  }
  return Status::OK();
}

// The IDX files' headers: the count and image size, checked as LoadIdxSplit
// checks them.
Status DescribeIdxSplit(const std::string& dir, Split split, DatasetShape* shape) {
  const std::string prefix = split == Split::kTrain ? "train" : "t10k";
  std::string images_path, labels_path;
  GAPTRAIN_RETURN_IF_ERROR(FindIdxFile(dir, prefix + "-images-idx3-ubyte", &images_path));
  GAPTRAIN_RETURN_IF_ERROR(FindIdxFile(dir, prefix + "-labels-idx1-ubyte", &labels_path));
  std::string images, labels;
  GAPTRAIN_RETURN_IF_ERROR(ReadFileHeadMaybeGzip(images_path, kIdxImagesHeader, &images));
  uint32_t count = 0, rows = 0, cols = 0;
  GAPTRAIN_RETURN_IF_ERROR(ReadIdxImagesHeader(images_path, images, &count, &rows, &cols));
  if (count == 0) return NoImages(images_path);
  GAPTRAIN_RETURN_IF_ERROR(ReadFileHeadMaybeGzip(labels_path, kIdxLabelsHeader, &labels));
  GAPTRAIN_RETURN_IF_ERROR(CheckIdxLabelsHeader(labels_path, labels, count, images_path));
  *shape = DatasetShape{count, 1, rows, cols, Dataset::kNumClasses};
  return Status::OK();
}

// CIFAR-10 batches hold fixed-size records: their count is the file size
// over the record size (a gzip batch is decompressed to be measured).
Status DescribeCifarSplit(const std::string& dir, Split split, DatasetShape* shape) {
  std::vector<std::string> paths;
  GAPTRAIN_RETURN_IF_ERROR(CifarFiles(dir, split, &paths));
  uint64_t total = 0;
  for (const std::string& path : paths) {
    char magic[2] = {0, 0};
    std::ifstream(path, std::ios::binary).read(magic, 2);
    const bool gzip = magic[0] == '\x1f' && magic[1] == '\x8b';
    uint64_t bytes = 0;
    if (gzip) {
      std::string contents;
      GAPTRAIN_RETURN_IF_ERROR(ReadFileMaybeGzip(path, &contents));
      bytes = contents.size();
    } else {
      struct stat st;
      if (::stat(path.c_str(), &st) != 0) return Status::NotFound(path + ": file not found");
      bytes = static_cast<uint64_t>(st.st_size);
    }
    if (bytes == 0 || bytes % kCifarRecordBytes != 0) {
      return Status::InvalidArgument(path + ": size " + Num(bytes) + " is not a positive multiple "
                                     "of the " + Num(kCifarRecordBytes) + "-byte record");
    }
    total += bytes / kCifarRecordBytes;
  }
  *shape = DatasetShape{total, kCifarChannels, kCifarSide, kCifarSide, Dataset::kNumClasses};
  return Status::OK();
}

Status LoadSplit(DatasetFormat format, const std::string& dir, Split split,
                 const std::string& cache_dir, Dataset* out, DatasetCacheUse* use) {
  switch (format) {
    case DatasetFormat::kMnistIdx: return LoadIdxSplit(dir, split, cache_dir, out, use);
    case DatasetFormat::kCifar10Bin: return LoadCifarSplit(dir, split, cache_dir, out, use);
  }
  return Status::InvalidArgument("data.format: unknown dataset format");
}

}  // namespace

const char* DatasetFormatName(DatasetFormat format) {
  for (const FormatName& f : kFormatNames) {
    if (f.format == format) return f.name;
  }
  return "unknown";
}

Status ParseDatasetFormat(const std::string& text, DatasetFormat* format) {
  std::string choices;
  for (const FormatName& f : kFormatNames) {
    if (text == f.name) {
      *format = f.format;
      return Status::OK();
    }
    if (!choices.empty()) choices += " | ";
    choices += f.name;
  }
  return Status::InvalidArgument("data.format: unknown format '" + text + "' (expected " +
                                 choices + ")");
}

const char* SplitName(Split split) { return split == Split::kTrain ? "train" : "test"; }

void ComputeChannelStats(const uint8_t* images, size_t n, int64_t channels,
                         size_t plane_size, std::vector<float>* mean,
                         std::vector<float>* stddev) {
  mean->assign(static_cast<size_t>(channels), 0.0f);
  stddev->assign(static_cast<size_t>(channels), 1.0f);
  if (n == 0 || plane_size == 0) return;
  // Four interleaved histograms per channel, so runs of equal pixels (MNIST
  // is mostly 0) do not serialise on one counter.
  std::vector<uint64_t> hist(static_cast<size_t>(channels) * 4 * 256, 0);
  const size_t image_size = static_cast<size_t>(channels) * plane_size;
  for (size_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < channels; ++c) {
      const uint8_t* p = images + i * image_size + static_cast<size_t>(c) * plane_size;
      uint64_t* h = hist.data() + static_cast<size_t>(c) * 4 * 256;
      size_t k = 0;
      for (; k + 4 <= plane_size; k += 4) {
        ++h[p[k]];
        ++h[256 + p[k + 1]];
        ++h[512 + p[k + 2]];
        ++h[768 + p[k + 3]];
      }
      for (; k < plane_size; ++k) ++h[p[k]];
    }
  }
  const double total = static_cast<double>(n) * static_cast<double>(plane_size);
  for (int64_t c = 0; c < channels; ++c) {
    const uint64_t* h = hist.data() + static_cast<size_t>(c) * 4 * 256;
    double sum = 0.0;
    for (int v = 0; v < 256; ++v) {
      double count = static_cast<double>(h[v] + h[256 + v] + h[512 + v] + h[768 + v]);
      sum += count * (v / 255.0);
    }
    const double m = sum / total;
    double var = 0.0;
    for (int v = 0; v < 256; ++v) {
      double count = static_cast<double>(h[v] + h[256 + v] + h[512 + v] + h[768 + v]);
      double d = v / 255.0 - m;
      var += count * d * d;
    }
    const double s = std::sqrt(var / total);
    (*mean)[static_cast<size_t>(c)] = static_cast<float>(m);
    (*stddev)[static_cast<size_t>(c)] = s > 0.0 ? static_cast<float>(s) : 1.0f;
  }
}

Status DescribeDataset(DatasetFormat format, const std::string& dir, Split split,
                       DatasetShape* shape) {
  *shape = DatasetShape();
  GAPTRAIN_RETURN_IF_ERROR(CheckDirectory(dir));
  switch (format) {
    case DatasetFormat::kMnistIdx: return DescribeIdxSplit(dir, split, shape);
    case DatasetFormat::kCifar10Bin: return DescribeCifarSplit(dir, split, shape);
  }
  return Status::InvalidArgument("data.format: unknown dataset format");
}

Status LoadDataset(DatasetFormat format, const std::string& dir, Split split,
                   Dataset* dataset) {
  DatasetCacheUse unused;
  return LoadDataset(format, dir, split, "", dataset, &unused);
}

Status LoadDataset(DatasetFormat format, const std::string& dir, Split split,
                   const std::string& inflate_cache_dir, Dataset* dataset,
                   DatasetCacheUse* cache_use) {
  *dataset = Dataset();
  *cache_use = DatasetCacheUse();
  GAPTRAIN_RETURN_IF_ERROR(CheckDirectory(dir));
  Dataset loaded;
  GAPTRAIN_RETURN_IF_ERROR(
      LoadSplit(format, dir, split, inflate_cache_dir, &loaded, cache_use));

  if (split == Split::kTrain) {
    ComputeChannelStats(loaded.images.data(), loaded.size(), loaded.channels,
                        static_cast<size_t>(loaded.height * loaded.width), &loaded.mean,
                        &loaded.stddev);
  } else {
    // The test split is normalised with the train split's statistics.
    Dataset train;
    Status s = LoadSplit(format, dir, Split::kTrain, inflate_cache_dir, &train, cache_use);
    if (!s.ok()) {
      return Status(s.code(), s.message() +
                                  " (the train split is needed for the normalisation "
                                  "statistics of the test split)");
    }
    if (train.channels != loaded.channels || train.height != loaded.height ||
        train.width != loaded.width) {
      return Status::InvalidArgument(
          dir + ": train images are " + Num(train.channels) + "x" + Num(train.height) + "x" +
          Num(train.width) + " but test images are " + Num(loaded.channels) + "x" +
          Num(loaded.height) + "x" + Num(loaded.width));
    }
    ComputeChannelStats(train.images.data(), train.size(), train.channels,
                        static_cast<size_t>(train.height * train.width), &loaded.mean,
                        &loaded.stddev);
  }
  *dataset = std::move(loaded);
  return Status::OK();
}

}  // namespace gaptrain
