// Backoff: the delays between retries of a failed call. Capped exponential
// with jitter: the n-th delay (n from 0) is
//     base_n * (1 - jitter * u),   base_n = min(max, initial * multiplier^n),
// with u uniform in [0, 1) from a seeded generator, so workers retrying
// against the same restarted server spread out instead of arriving
// together, while one seed always gives the same delays (tests).
//
// What callers may rely on: every delay lies in [base_n * (1 - jitter),
// base_n], never above `max`; Reset() (after a success) starts again from
// `initial`. Not thread-safe; one Backoff per retry loop.

#ifndef GAPTRAIN_SERVICES_BASE_BACKOFF_H_
#define GAPTRAIN_SERVICES_BASE_BACKOFF_H_

#include <chrono>
#include <cstdint>

#include "services/base/status.h"
#include "services/base/xoshiro256.h"

namespace gaptrain {

class Backoff {
 public:
  struct Options {
    std::chrono::milliseconds initial{100};
    std::chrono::milliseconds max{5000};
    double multiplier = 2.0;  // >= 1
    double jitter = 0.5;      // in [0, 1]: the fraction of a delay that is random
  };

  // INVALID_ARGUMENT naming the field when `options` is out of range.
  static Status Validate(const Options& options);

  // `options` must be valid (checked by assert only).
  Backoff(const Options& options, uint64_t seed);

  // The delay before the next retry; counts one failure.
  std::chrono::milliseconds Next();
  // A success: the next delay is `initial` again.
  void Reset() { failures_ = 0; }
  // Failures since the last Reset.
  int failures() const { return failures_; }
  const Options& options() const { return options_; }

 private:
  Options options_;
  Xoshiro256 rng_;
  int failures_ = 0;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_BASE_BACKOFF_H_
