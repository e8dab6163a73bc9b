#include "services/master/tensor_ranges.h"

#include <algorithm>
#include <memory>
#include <thread>

namespace gaptrain {
namespace {

// Below this many elements per thread, starting a thread costs more than
// the memory-bound pass it would take over.
constexpr size_t kMinElementsPerThread = size_t{1} << 18;

// Calls kernel on [lo, hi) (one tensor piece) with the gradient's values:
// all at once from an array, block by block from wire bytes.
void RunPiece(size_t lo, size_t hi, const GradientView* gradient, const RangeKernel& kernel,
              GapAccumulator* acc, std::unique_ptr<GradientView::Scratch>* scratch) {
  if (gradient == nullptr) {
    kernel(lo, hi, nullptr, acc);
  } else if (gradient->contiguous()) {
    kernel(lo, hi, gradient->Read(lo, hi, nullptr), acc);
  } else {
    if (*scratch == nullptr) *scratch = std::make_unique<GradientView::Scratch>();
    for (size_t b0 = lo; b0 < hi; b0 += GradientView::kBlock) {
      const size_t b1 = std::min(hi, b0 + GradientView::kBlock);
      kernel(b0, b1, gradient->Read(b0, b1, scratch->get()), acc);
    }
  }
}

// Calls kernel on each tensor piece of [begin, end), accumulating per tensor.
void RunRange(const ParameterLayout& layout, size_t begin, size_t end,
              const GradientView* gradient, const RangeKernel& kernel,
              std::vector<GapAccumulator>* per_tensor) {
  if (begin >= end) return;
  std::unique_ptr<GradientView::Scratch> scratch;  // this thread's, made when needed
  const auto& tensors = layout.tensors();
  for (size_t t = layout.TensorIndexOf(begin); t < tensors.size(); ++t) {
    size_t lo = std::max(begin, tensors[t].offset);
    size_t hi = std::min(end, tensors[t].offset + tensors[t].size);
    if (lo >= end) break;
    if (lo < hi) RunPiece(lo, hi, gradient, kernel, &(*per_tensor)[t], &scratch);
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
  const size_t n = layout.size();
  const size_t num_tensors = layout.num_tensors();
  size_t threads = std::min<size_t>(std::max(num_threads, 1),
                                    std::max<size_t>(1, n / kMinElementsPerThread));

  std::vector<std::vector<GapAccumulator>> partial(
      threads, std::vector<GapAccumulator>(num_tensors));
  if (threads == 1) {
    RunRange(layout, 0, n, gradient, kernel, &partial[0]);
  } else {
    std::vector<std::thread> pool;
    pool.reserve(threads - 1);
    for (size_t i = 1; i < threads; ++i) {
      pool.emplace_back([&, i] {
        RunRange(layout, n * i / threads, n * (i + 1) / threads, gradient, kernel,
                 &partial[i]);
      });
    }
    RunRange(layout, 0, n / threads, gradient, kernel, &partial[0]);
    for (std::thread& t : pool) t.join();
  }

  if (stats == nullptr) return;
  GapAccumulator total;
  stats->per_tensor.resize(num_tensors);
  for (size_t t = 0; t < num_tensors; ++t) {
    GapAccumulator tensor;
    for (size_t i = 0; i < threads; ++i) tensor.Merge(partial[i][t]);
    stats->per_tensor[t] = tensor.ToStats();
    total.Merge(tensor);
  }
  stats->has_gap = true;
  stats->gap = total.ToStats();
  stats->penalty_mean = stats->gap.penalty_mean;
}

}  // namespace gaptrain
