// Epoch order: which sample a position of an epoch reads, and how an epoch's
// positions are divided among workers.
//
// EpochPermutation is a pure function of (seed, epoch, n), identical on every
// platform, compiler and standard library: its own Fisher-Yates shuffle
// driven by xoshiro256** seeded through splitmix64, with Lemire's unbiased
// bounded integers. (std::shuffle and std::uniform_int_distribution are
// avoided: their output is implementation-defined.) Every worker, the
// coordinator and a restarted process derive the same order from the seed,
// so only ranges of positions ever need to be sent. The algorithm is frozen
// by golden values in epoch_order_test.cc: changing it changes every run.

#ifndef GAPTRAIN_SERVICES_LEARN_EPOCH_ORDER_H_
#define GAPTRAIN_SERVICES_LEARN_EPOCH_ORDER_H_

#include <cstdint>
#include <vector>

#include "services/base/xoshiro256.h"

namespace gaptrain {

// Positions [begin, end) of an epoch's permutation; empty when begin == end.
struct SampleRange {
  uint32_t begin = 0;
  uint32_t end = 0;

  uint32_t size() const { return end > begin ? end - begin : 0; }
  bool empty() const { return end <= begin; }
};

// A permutation of [0, n): entry p is the sample read at position p of
// `epoch`. Different (seed, epoch) pairs give unrelated permutations.
std::vector<uint32_t> EpochPermutation(uint64_t seed, uint64_t epoch, uint32_t n);

// Worker `worker`'s contiguous share of [0, n) when it is split among
// `num_workers`: the first n % num_workers workers get one position more, so
// sizes differ by at most one, and the ranges of workers 0..num_workers-1
// are in order and cover [0, n) exactly once. Returns {n, n} (empty) when
// worker >= num_workers, including num_workers == 0.
SampleRange ShardRange(uint32_t worker, uint32_t num_workers, uint32_t n);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_LEARN_EPOCH_ORDER_H_
