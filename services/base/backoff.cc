#include "services/base/backoff.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <string>

namespace gaptrain {

Status Backoff::Validate(const Options& o) {
  if (o.initial.count() < 0) return Status::InvalidArgument("backoff initial: must be >= 0");
  if (o.max < o.initial) return Status::InvalidArgument("backoff max: must be >= initial");
  if (!(o.multiplier >= 1.0) || !std::isfinite(o.multiplier)) {
    return Status::InvalidArgument("backoff multiplier: must be >= 1, got " +
                                   std::to_string(o.multiplier));
  }
  if (!(o.jitter >= 0.0 && o.jitter <= 1.0)) {
    return Status::InvalidArgument("backoff jitter: must be in [0, 1], got " +
                                   std::to_string(o.jitter));
  }
  return Status::OK();
}

Backoff::Backoff(const Options& options, uint64_t seed)
    : options_(options), rng_(seed, /*stream=*/0xBAC0FF) {
  assert(Validate(options).ok());
}

std::chrono::milliseconds Backoff::Next() {
  const double initial = static_cast<double>(options_.initial.count());
  const double cap = static_cast<double>(options_.max.count());
  // initial * multiplier^n without overflow: stop growing once capped.
  double base = initial;
  for (int i = 0; i < failures_ && base < cap; ++i) base *= options_.multiplier;
  base = std::min(base, cap);
  ++failures_;
  const double u = static_cast<double>(rng_.Next() >> 11) * 0x1.0p-53;  // [0, 1)
  const double delay = base * (1.0 - options_.jitter * u);
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(delay)));
}

}  // namespace gaptrain
