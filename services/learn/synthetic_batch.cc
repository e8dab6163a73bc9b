#include "services/learn/synthetic_batch.h"

namespace gaptrain {

SyntheticBatch RandomBatch(const ModelInput& input, int64_t size, uint32_t seed) {
  SyntheticBatch b;
  b.size = size;
  b.images.resize(static_cast<size_t>(size * input.channels * input.height * input.width));
  uint64_t state = 0x9E3779B97F4A7C15ull * (seed + 1);
  for (float& v : b.images) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    v = (static_cast<float>(state >> 40) * (1.0f / 16777216.0f) - 0.5f) * 3.4641f;
  }
  for (int64_t i = 0; i < size; ++i) b.labels.push_back((i * 7 + seed) % input.num_classes);
  return b;
}

}  // namespace gaptrain
