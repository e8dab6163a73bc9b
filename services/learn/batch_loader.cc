#include "services/learn/batch_loader.h"

#include <algorithm>
#include <cassert>

namespace gaptrain {

BatchLoader::BatchLoader(const Dataset& dataset, int64_t batch_size)
    : dataset_(dataset),
      batch_size_(batch_size),
      image_floats_(dataset.image_size()),
      plane_size_(static_cast<size_t>(dataset.height * dataset.width)) {
  assert(batch_size >= 1);
  assert(dataset.mean.size() == static_cast<size_t>(dataset.channels));
  assert(dataset.stddev.size() == static_cast<size_t>(dataset.channels));
  const size_t channels = static_cast<size_t>(dataset.channels);
  table_.resize(channels * 256);
  for (size_t c = 0; c < channels; ++c) {
    // In double, then rounded once: the nearest float to the exact value.
    const double mean = c < dataset.mean.size() ? dataset.mean[c] : 0.0;
    const double stddev = c < dataset.stddev.size() ? dataset.stddev[c] : 1.0;
    for (int v = 0; v < 256; ++v) {
      table_[c * 256 + v] = static_cast<float>((v / 255.0 - mean) / stddev);
    }
  }
}

size_t BatchLoader::Fill(const uint32_t* indices, size_t count, float* images,
                         int64_t* labels) const {
  const size_t k = std::min(count, static_cast<size_t>(batch_size_));
  const size_t channels = static_cast<size_t>(dataset_.channels);
  for (size_t b = 0; b < k; ++b) {
    const uint32_t index = indices[b];
    assert(index < dataset_.size());
    const uint8_t* src = dataset_.image(index);
    float* dst = images + b * image_floats_;
    for (size_t c = 0; c < channels; ++c) {
      const float* table = table_.data() + c * 256;
      const uint8_t* s = src + c * plane_size_;
      float* d = dst + c * plane_size_;
      for (size_t p = 0; p < plane_size_; ++p) d[p] = table[s[p]];
    }
    labels[b] = dataset_.labels[index];
  }
  return k;
}

BatchIterator::BatchIterator(const BatchLoader& loader, const std::vector<uint32_t>& order,
                             SampleRange range)
    : loader_(loader), order_(order.data()), range_(range), position_(range.begin) {
  if (range.begin > range.end || range.end > order.size()) {
    status_ = Status::OutOfRange("sample range [" + std::to_string(range.begin) + ", " +
                                 std::to_string(range.end) + ") is not within the epoch's " +
                                 std::to_string(order.size()) + " positions");
    return;
  }
  const size_t n = loader.dataset().size();
  for (uint32_t p = range.begin; p < range.end; ++p) {
    if (order[p] >= n) {
      status_ = Status::OutOfRange("position " + std::to_string(p) + " of the epoch order names sample " +
                                   std::to_string(order[p]) + ", but the dataset has " +
                                   std::to_string(n));
      return;
    }
  }
}

size_t BatchIterator::Next(float* images, int64_t* labels) {
  if (Done()) return 0;
  const size_t written =
      loader_.Fill(order_ + position_, range_.end - position_, images, labels);
  position_ += static_cast<uint32_t>(written);
  return written;
}

}  // namespace gaptrain
