// MovingDuration: how long one phase of a training step (pull, compute,
// push) takes lately, as a moving average (weight 0.1 for the newest; the
// first sample sets it). After a preemption the trainer starts only the
// phases that still fit in the grace period.

#ifndef GAPTRAIN_SERVICES_WORKER_MOVING_DURATION_H_
#define GAPTRAIN_SERVICES_WORKER_MOVING_DURATION_H_

#include <chrono>

namespace gaptrain {

class MovingDuration {
 public:
  using Clock = std::chrono::steady_clock;

  // Adds the phase that began at `start` and ends now; returns its seconds.
  double AddSince(Clock::time_point start) {
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    seconds_ = seconds_ == 0 ? s : 0.9 * seconds_ + 0.1 * s;
    return s;
  }
  double seconds() const { return seconds_; }

 private:
  double seconds_ = 0;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_WORKER_MOVING_DURATION_H_
