#include "services/base/xoshiro256.h"

namespace gaptrain {
namespace {

// splitmix64 (Steele, Lea, Flood 2014): advances *state and returns a mixed
// value; the standard way to seed xoshiro.
uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

Xoshiro256::Xoshiro256(uint64_t seed, uint64_t stream) {
  // Mix the stream into the seed through one splitmix64 output, so that
  // nearby (seed, stream) pairs start far apart.
  uint64_t stream_state = stream;
  uint64_t state = seed ^ SplitMix64(&stream_state);
  for (uint64_t& word : s_) word = SplitMix64(&state);
  // splitmix64 is a bijection of its counter, so four consecutive outputs
  // are never all zero (the one state xoshiro must avoid).
}

uint64_t Xoshiro256::Next() {  // xoshiro256** 1.0 (Blackman, Vigna 2018)
  const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

uint32_t Xoshiro256::Below(uint32_t bound) {
  // Lemire, "Fast random integer generation in an interval" (2019), on the
  // high 32 bits of each draw; rejection removes the bias.
  uint64_t m = (Next() >> 32) * uint64_t{bound};
  uint32_t low = static_cast<uint32_t>(m);
  if (low < bound) {
    const uint32_t threshold = static_cast<uint32_t>(-bound) % bound;
    while (low < threshold) {
      m = (Next() >> 32) * uint64_t{bound};
      low = static_cast<uint32_t>(m);
    }
  }
  return static_cast<uint32_t>(m >> 32);
}

}  // namespace gaptrain
