// Xoshiro256: a small deterministic random generator (xoshiro256**,
// seeded from (seed, stream) through splitmix64) whose output is the same
// on every platform, compiler and standard library, unlike std::mt19937's
// distributions. Epoch orders, simulated batch times and retry jitter are
// drawn from it, so one seed always gives the same run.

#ifndef GAPTRAIN_SERVICES_BASE_XOSHIRO256_H_
#define GAPTRAIN_SERVICES_BASE_XOSHIRO256_H_

#include <cstdint>

namespace gaptrain {

class Xoshiro256 {
 public:
  Xoshiro256(uint64_t seed, uint64_t stream);

  uint64_t Next();
  // Uniform in [0, bound), bound > 0, without modulo bias.
  uint32_t Below(uint32_t bound);

 private:
  uint64_t s_[4];
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_BASE_XOSHIRO256_H_
