// Dataset: one split (train or test) of an image-classification dataset held
// in memory as uint8, read from the files of a dataset directory.
//
// Formats (the manifest's spec.data.format):
//   "mnist-idx"   MNIST-style IDX files: train-images-idx3-ubyte,
//                 train-labels-idx1-ubyte, t10k-images-idx3-ubyte,
//                 t10k-labels-idx1-ubyte, each either plain or gzip with a
//                 ".gz" suffix (the plain file wins when both exist).
//                 Fashion-MNIST uses the same files. 1 channel.
//   "cifar10-bin" CIFAR-10's binary version: data_batch_1.bin ..
//                 data_batch_5.bin for train (all that exist, in that order;
//                 at least one), test_batch.bin for test. Each record is one
//                 label byte then 3072 pixel bytes, the R, G and B planes of
//                 a 32x32 image. 3 channels.
//
// Normalisation: mean and std are per channel, in units of pixel/255, and
// are ALWAYS those of the train split of the same directory, computed exactly
// from its pixels (population std). Loading the test split therefore also
// reads the train images (their pixels are dropped after one counting pass),
// so train and test are normalised identically without the caller passing
// anything, at the cost of decoding the train images once more (about 0.3 s
// for MNIST). A channel whose std is 0 gets std 1.
//
// Every error names the file (or the directory) it is about; format errors
// also give the byte offset, and for a bad label the record index. Offsets
// in a .gz file are offsets in its uncompressed contents.

#ifndef GAPTRAIN_SERVICES_LEARN_DATASET_H_
#define GAPTRAIN_SERVICES_LEARN_DATASET_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "services/base/status.h"

namespace gaptrain {

enum class DatasetFormat { kMnistIdx, kCifar10Bin };

// "mnist-idx" | "cifar10-bin".
const char* DatasetFormatName(DatasetFormat format);
// Parses the manifest's spelling; the error names the field "data.format"
// and lists the choices.
Status ParseDatasetFormat(const std::string& text, DatasetFormat* format);

enum class Split { kTrain, kTest };

const char* SplitName(Split split);  // "train" | "test"

struct Dataset {
  static constexpr int kNumClasses = 10;

  // size() x channels x height x width, row-major (N x C x H x W).
  std::vector<uint8_t> images;
  // size() labels, each in [0, num_classes).
  std::vector<uint8_t> labels;

  int64_t channels = 0;
  int64_t height = 0;
  int64_t width = 0;
  int64_t num_classes = kNumClasses;

  // Per channel (channels entries): the train split's pixel mean and std in
  // [0, 1] units; a loader computes (x/255 - mean[c]) / stddev[c].
  std::vector<float> mean;
  std::vector<float> stddev;

  size_t size() const { return labels.size(); }
  // Bytes (= pixels) per image: channels * height * width.
  size_t image_size() const { return static_cast<size_t>(channels * height * width); }
  // The first pixel of image i (i < size()).
  const uint8_t* image(size_t i) const { return images.data() + i * image_size(); }
};

// Loads `split` of the dataset in directory `dir`, replacing *dataset.
// On error *dataset is left empty (size() == 0).
Status LoadDataset(DatasetFormat format, const std::string& dir, Split split,
                   Dataset* dataset);

// What the inflate cache did for one LoadDataset: for the log.
struct DatasetCacheUse {
  int files_from_cache = 0;  // served by an inflated copy
  int files_cached = 0;      // inflated here, their copies left for the next
  std::string bypassed;      // the first gzip file read without the cache, and why
};

// The same, keeping the inflated copies of gzip'd image files in
// `inflate_cache_dir` for the other processes of the machine, and reading
// them from there when another process put them there first
// (services/learn/inflated_cache.h); the bytes loaded are the same either
// way. Empty: no cache.
Status LoadDataset(DatasetFormat format, const std::string& dir, Split split,
                   const std::string& inflate_cache_dir, Dataset* dataset,
                   DatasetCacheUse* cache_use);

// What a service needs to know of a split without its pixels: how many
// samples, and the shape of one. Read from the files' headers (IDX: the
// images file's first 16 bytes and the labels file's first 8; CIFAR-10: the
// batch files' sizes), so the master and the coordinator start without
// decompressing the dataset. The files are checked as far as the headers
// go, with LoadDataset's messages; LoadDataset checks every byte.
struct DatasetShape {
  uint64_t samples = 0;
  int64_t channels = 0;
  int64_t height = 0;
  int64_t width = 0;
  int64_t num_classes = Dataset::kNumClasses;
};
Status DescribeDataset(DatasetFormat format, const std::string& dir, Split split,
                       DatasetShape* shape);

// Per-channel mean and population std, in [0, 1] units, of `n` images of
// `channels` planes of `plane_size` pixels each, laid out N x C x plane.
// Exact (a 256-bin histogram per channel, summed in double). Used by
// LoadDataset; exposed for callers that build a Dataset themselves.
void ComputeChannelStats(const uint8_t* images, size_t n, int64_t channels,
                         size_t plane_size, std::vector<float>* mean,
                         std::vector<float>* stddev);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_LEARN_DATASET_H_
