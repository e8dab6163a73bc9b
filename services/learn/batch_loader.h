// BatchLoader: turns samples of a Dataset into a training batch, writing
// normalised float32 images (batch x C x H x W, (x/255 - mean[c]) / stddev[c])
// and int64 labels into buffers the CALLER owns. Nothing is allocated per
// batch: the caller sizes its two buffers once (images_buffer_size(),
// labels_buffer_size()) and passes the same pointers to every Fill, so the
// worker can wrap them once with torch::from_blob. The buffers' contents
// beyond the samples written by a short batch are left unchanged.
//
// BatchIterator walks positions [range.begin, range.end) of an epoch's
// permutation (EpochPermutation) batch by batch; the coordinator hands out
// such ranges.
//
// A BatchLoader holds a reference to the Dataset and a 256-entry table per
// channel; both are read-only after construction, so one loader may fill
// different buffers from several threads at once.

#ifndef GAPTRAIN_SERVICES_LEARN_BATCH_LOADER_H_
#define GAPTRAIN_SERVICES_LEARN_BATCH_LOADER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "services/base/status.h"
#include "services/learn/dataset.h"
#include "services/learn/epoch_order.h"

namespace gaptrain {

class BatchLoader {
 public:
  // `dataset` must outlive the loader and have mean/stddev for each channel
  // (LoadDataset fills them); batch_size >= 1.
  BatchLoader(const Dataset& dataset, int64_t batch_size);
  BatchLoader(Dataset&&, int64_t) = delete;  // would dangle

  const Dataset& dataset() const { return dataset_; }
  int64_t batch_size() const { return batch_size_; }
  // Floats per image: C * H * W.
  size_t image_floats() const { return image_floats_; }
  // The buffer lengths Fill needs: batch_size * C * H * W floats and
  // batch_size int64 labels.
  size_t images_buffer_size() const { return static_cast<size_t>(batch_size_) * image_floats_; }
  size_t labels_buffer_size() const { return static_cast<size_t>(batch_size_); }

  // Writes samples indices[0 .. k), k = min(count, batch_size), into
  // images[0 .. k*C*H*W) and labels[0 .. k); returns k. Every index must be
  // < dataset().size() (checked only by assert; BatchIterator validates).
  size_t Fill(const uint32_t* indices, size_t count, float* images, int64_t* labels) const;

  // The normalised value of pixel value `v` in channel `c`.
  float Normalized(int64_t c, uint8_t v) const { return table_[static_cast<size_t>(c) * 256 + v]; }

 private:
  const Dataset& dataset_;
  int64_t batch_size_;
  size_t image_floats_;
  size_t plane_size_;
  std::vector<float> table_;  // channels x 256: the value of each pixel byte
};

class BatchIterator {
 public:
  // Iterates positions [range.begin, range.end) of `order`, a permutation of
  // the loader's dataset (EpochPermutation(seed, epoch, dataset.size())).
  // `loader` and `order` must outlive the iterator. If the range does not lie
  // within `order`, or an index in it is not a sample of the dataset, status()
  // says so and Next() returns 0.
  BatchIterator(const BatchLoader& loader, const std::vector<uint32_t>& order,
                SampleRange range);
  BatchIterator(const BatchLoader&, std::vector<uint32_t>&&, SampleRange) = delete;

  const Status& status() const { return status_; }
  bool Done() const { return !status_.ok() || position_ >= range_.end; }
  // The permutation position of the next sample (range.end when done).
  uint32_t position() const { return position_; }
  // Samples left in the range.
  uint32_t remaining() const { return Done() ? 0 : range_.end - position_; }

  // Fills the next batch (batch_size samples, fewer for the last one) into
  // the caller's buffers; returns the samples written, 0 when done.
  size_t Next(float* images, int64_t* labels);

 private:
  const BatchLoader& loader_;
  const uint32_t* order_;
  SampleRange range_;
  uint32_t position_;
  Status status_;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_LEARN_BATCH_LOADER_H_
