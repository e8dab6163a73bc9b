#ifndef GAPTRAIN_SERVICES_LEARN_SYNTHETIC_BATCH_H_
#define GAPTRAIN_SERVICES_LEARN_SYNTHETIC_BATCH_H_

#include <cstdint>
#include <vector>

#include "services/learn/model.h"

namespace gaptrain {

// A batch of made-up images for tests and benchmarks that need a model's
// input but not real data.
struct SyntheticBatch {
  std::vector<float> images;  // size x channels x height x width
  std::vector<int64_t> labels;
  int64_t size = 0;
};

// Pixels uniform in [-1.73, 1.73) (mean 0, std 1), labels cycling through
// the classes; the same `seed` gives the same batch on every machine. A
// bare LCG rather than <random>'s distributions: tests build at -O0, where
// those are the slow part.
SyntheticBatch RandomBatch(const ModelInput& input, int64_t size, uint32_t seed);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_LEARN_SYNTHETIC_BATCH_H_
