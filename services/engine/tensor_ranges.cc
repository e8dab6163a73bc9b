#include "services/engine/tensor_ranges.h"

#include <algorithm>
#include <memory>

#include "services/engine/helping_pool.h"

namespace gaptrain {
namespace {

// Below this many elements per thread, waking a helper costs more than the
// memory-bound pass it would take over.
constexpr size_t kMinElementsPerThread = size_t{1} << 18;

// The unit of work threads claim: big enough that claiming is free, small
// enough that a caller whose helper wakes late waits for little. A multiple
// of GradientView::kBlock, so blocks and kernels' statistics blocks start
// where they would in one pass over the tensor.
constexpr size_t kUnit = size_t{1} << 16;
static_assert(kUnit % GradientView::kBlock == 0, "units must hold whole blocks");

// A piece of one tensor: [begin, end), a multiple of kUnit past the
// tensor's start.
struct Unit {
  size_t begin;
  size_t end;
  size_t tensor;
};

std::vector<Unit> UnitsOf(const ParameterLayout& layout) {
  std::vector<Unit> units;
  units.reserve(layout.num_tensors() + layout.size() / kUnit);
  const auto& tensors = layout.tensors();
  for (size_t t = 0; t < tensors.size(); ++t) {
    const size_t end = tensors[t].offset + tensors[t].size;
    for (size_t lo = tensors[t].offset; lo < end; lo += kUnit) {
      units.push_back({lo, std::min(end, lo + kUnit), t});
    }
  }
  return units;
}

// Calls kernel on [lo, hi) (part of one tensor) with the gradient's values:
// all at once from an array, block by block from wire bytes.
void RunPiece(size_t lo, size_t hi, const GradientView* gradient, const RangeKernel& kernel,
              GapAccumulator* acc) {
  if (gradient == nullptr) {
    kernel(lo, hi, nullptr, acc);
  } else if (gradient->contiguous()) {
    kernel(lo, hi, gradient->Read(lo, hi, nullptr), acc);
  } else {
    thread_local std::unique_ptr<GradientView::Scratch> scratch;  // stays in L1
    if (scratch == nullptr) scratch = std::make_unique<GradientView::Scratch>();
    for (size_t b0 = lo; b0 < hi; b0 += GradientView::kBlock) {
      const size_t b1 = std::min(hi, b0 + GradientView::kBlock);
      kernel(b0, b1, gradient->Read(b0, b1, scratch.get()), acc);
    }
  }
}

}  // namespace

void GapAccumulator::Merge(const GapAccumulator& o) {
  gap_sum += o.gap_sum;
  penalty_sum += o.penalty_sum;
  gap_max = std::max(gap_max, o.gap_max);
  penalised += o.penalised;
  count += o.count;
}

GapStats GapAccumulator::ToStats() const {
  GapStats s;
  if (count == 0) return s;
  double n = static_cast<double>(count);
  s.gap_mean = gap_sum / n;
  s.gap_max = gap_max;
  s.penalty_mean = penalty_sum / n;
  s.penalised_fraction = static_cast<double>(penalised) / n;
  return s;
}

void ForEachRange(const ParameterLayout& layout, int num_threads, const GradientView* gradient,
                  const RangeKernel& kernel, ApplyStats* stats) {
  const size_t threads = std::min<size_t>(
      std::max(num_threads, 1), std::max<size_t>(1, layout.size() / kMinElementsPerThread));
  const std::vector<Unit> units = UnitsOf(layout);
  // One accumulator per unit, summed in unit order below: the statistics do
  // not depend on which thread ran which unit, nor on how many threads ran.
  std::vector<GapAccumulator> per_unit(units.size());
  HelpingPool::Shared()->Run(units.size(), static_cast<int>(threads) - 1, [&](size_t i) {
    RunPiece(units[i].begin, units[i].end, gradient, kernel, &per_unit[i]);
  });

  if (stats == nullptr) return;
  std::vector<GapAccumulator> per_tensor(layout.num_tensors());
  for (size_t i = 0; i < units.size(); ++i) per_tensor[units[i].tensor].Merge(per_unit[i]);
  GapAccumulator total;
  stats->per_tensor.resize(per_tensor.size());
  for (size_t t = 0; t < per_tensor.size(); ++t) {
    stats->per_tensor[t] = per_tensor[t].ToStats();
    total.Merge(per_tensor[t]);
  }
  stats->has_gap = true;
  stats->gap = total.ToStats();
  stats->penalty_mean = stats->gap.penalty_mean;
}

}  // namespace gaptrain
