#include "services/engine/shard_plan.h"

#include <algorithm>
#include <string>

namespace gaptrain {

namespace {

// The tensor boundary (an offset, 0 and P included) nearest to `cut`.
size_t NearestTensorBoundary(const ParameterLayout& layout, size_t cut) {
  size_t best = 0;
  size_t best_distance = cut;
  for (const TensorSpec& t : layout.tensors()) {
    const size_t end = t.offset + t.size;
    const size_t distance = end > cut ? end - cut : cut - end;
    if (distance < best_distance) {
      best = end;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace

Status PlanShards(const ParameterLayout& layout, uint32_t count, std::vector<ParameterShard>* plan) {
  const size_t p = layout.size();
  if (count == 0) return Status::InvalidArgument("a model needs at least one shard, got 0");
  if (count > p) {
    return Status::InvalidArgument("the model has " + std::to_string(p) +
                                   " parameters, fewer than its " + std::to_string(count) +
                                   " shards");
  }
  plan->clear();
  const size_t tolerance = p / count / 8;
  size_t begin = 0;
  for (uint32_t k = 1; k <= count; ++k) {
    // k·P/S without overflow for any P a machine can hold.
    const size_t ideal = static_cast<size_t>(static_cast<unsigned __int128>(p) * k / count);
    size_t end = ideal;
    if (k < count) {
      const size_t snapped = NearestTensorBoundary(layout, ideal);
      const size_t distance = snapped > ideal ? snapped - ideal : ideal - snapped;
      if (distance <= tolerance && snapped > begin && snapped < p) end = snapped;
    }
    if (end <= begin) end = begin + 1;  // P >= S: an ideal cut is always past the last
    plan->push_back(ParameterShard{k - 1, count, begin, end});
    begin = end;
  }
  return Status::OK();
}

ParameterLayout ShardLayout(const ParameterLayout& layout, const ParameterShard& range) {
  ParameterLayout shard;
  for (const TensorSpec& t : layout.tensors()) {
    if (t.size == 0) {
      // An empty tensor goes with the shard its offset falls in (the last
      // one for an offset of P), so every shard's layout names it once.
      const bool last = range.end == layout.size();
      if (t.offset < range.begin || t.offset > range.end || (t.offset == range.end && !last)) {
        continue;
      }
      (void)shard.Add(t.name, t.shape);
      continue;
    }
    const size_t first = std::max(t.offset, range.begin);
    const size_t end = std::min(t.offset + t.size, range.end);
    if (first >= end) continue;
    // Names come from a valid layout, unique and non-empty: Add succeeds.
    if (first == t.offset && end == t.offset + t.size) {
      (void)shard.Add(t.name, t.shape);
    } else {
      (void)shard.Add(t.name + "[" + std::to_string(first - t.offset) + ":" +
                          std::to_string(end - t.offset) + ")",
                      {static_cast<int64_t>(end - first)});
    }
  }
  return shard;
}

}  // namespace gaptrain
