#include "operator/kube/backoff.h"

#include <algorithm>
#include <cmath>

namespace gaptrain {
namespace kube {

Backoff::Backoff(const Options& options) : options_(options), random_(options.seed) {
  options_.factor = std::max(1.0, options_.factor);
  options_.jitter = std::min(1.0, std::max(0.0, options_.jitter));
  options_.max = std::max(options_.max, options_.initial);
}

std::chrono::milliseconds Backoff::Next() {
  const double max_ms = static_cast<double>(options_.max.count());
  double ms = static_cast<double>(options_.initial.count()) *
              std::pow(options_.factor, static_cast<double>(attempts_));
  ms = std::min(ms, max_ms);
  if (ms < max_ms) ++attempts_;  // stop growing (and overflowing) at the cap
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(random_);
  ms *= 1.0 - options_.jitter * u;
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(ms)));
}

}  // namespace kube
}  // namespace gaptrain
