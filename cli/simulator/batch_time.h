// BatchTimeSampler: how long a virtual worker takes for one batch,
// X ~ Gamma(shape k, scale mean/k), as in the GA and DANA papers'
// asynchrony model (k = 100 gives coefficient of variation 0.1 and near
// round-robin order). Marsaglia-Tsang on xoshiro256**, so a seed gives
// the same times with any standard library.

#ifndef GAPTRAIN_CLI_SIMULATOR_BATCH_TIME_H_
#define GAPTRAIN_CLI_SIMULATOR_BATCH_TIME_H_

#include <cstdint>

#include "services/learn/epoch_order.h"

namespace gaptrain {

class BatchTimeSampler {
 public:
  BatchTimeSampler(double shape, double mean, uint64_t seed);

  // One batch time, with mean `mean · slowdown`.
  double Draw(double slowdown = 1.0);

  // Uniform in (0, 1); used for the simulator's other random choices.
  double Uniform();

 private:
  double Normal();
  double StandardGamma(double shape);

  double shape_;
  double mean_;
  Xoshiro256 rng_;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_CLI_SIMULATOR_BATCH_TIME_H_
