#include "services/learn/epoch_order.h"

#include <utility>

namespace gaptrain {

std::vector<uint32_t> EpochPermutation(uint64_t seed, uint64_t epoch, uint32_t n) {
  std::vector<uint32_t> order(n);
  for (uint32_t i = 0; i < n; ++i) order[i] = i;
  Xoshiro256 rng(seed, epoch);
  // Fisher-Yates, from the back: position i takes a uniform pick of [0, i].
  for (uint32_t i = n; i > 1; --i) {
    const uint32_t j = rng.Below(i);
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

SampleRange ShardRange(uint32_t worker, uint32_t num_workers, uint32_t n) {
  if (worker >= num_workers) return {n, n};
  const uint64_t base = n / num_workers;
  const uint64_t extra = n % num_workers;
  const uint64_t begin = worker * base + (worker < extra ? worker : extra);
  const uint64_t end = begin + base + (worker < extra ? 1 : 0);
  return {static_cast<uint32_t>(begin), static_cast<uint32_t>(end)};
}

}  // namespace gaptrain
