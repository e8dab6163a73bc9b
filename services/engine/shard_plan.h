// Shard plan: how θ's P flat parameters are cut into the contiguous ranges
// that S masters hold (spec.master.shards). Masters and trainers compute
// it from the model's layout alone, so they agree without talking.
//
// What callers may rely on:
//   - The ranges tile [0, P) in order: shard 0 begins at 0, each begins
//     where the one before ends, the last ends at P; none is empty.
//   - A boundary lies on a tensor boundary when one is within an eighth of
//     a shard's fair share (P / S) of the ideal cut k·P/S; otherwise the
//     cut is exactly k·P/S, inside the tensor. So no shard holds more than
//     P/S·(1 + 1/4) parameters, and a model of many small tensors keeps
//     every tensor whole.
//   - The same layout and S give the same plan, on any machine.

#ifndef GAPTRAIN_SERVICES_ENGINE_SHARD_PLAN_H_
#define GAPTRAIN_SERVICES_ENGINE_SHARD_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "services/base/status.h"
#include "services/engine/parameter_layout.h"

namespace gaptrain {

// One master's part of θ: flat parameters [begin, end).
struct ParameterShard {
  uint32_t index = 0;
  uint32_t count = 1;
  size_t begin = 0;
  size_t end = 0;

  size_t size() const { return end - begin; }
  bool operator==(const ParameterShard& o) const {
    return index == o.index && count == o.count && begin == o.begin && end == o.end;
  }
  bool operator!=(const ParameterShard& o) const { return !(*this == o); }
};

// The plan for `count` shards. InvalidArgument when count is 0 or above
// the model's parameter count.
Status PlanShards(const ParameterLayout& layout, uint32_t count, std::vector<ParameterShard>* plan);

// The layout of `range`'s part of θ, which the shard's engine, checkpoints
// and metrics use: a tensor wholly inside keeps its name and shape; a
// piece of a cut tensor is a flat tensor named "NAME[FIRST:END)" with its
// elements' indices within the tensor. The whole layout when the range is.
ParameterLayout ShardLayout(const ParameterLayout& layout, const ParameterShard& range);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_ENGINE_SHARD_PLAN_H_
