// TickTimer: calls a function every `period` on a thread of its own, driven
// by a Boost.Asio steady_timer. The coordinator's leases run on it: the
// process ticks the core, and the core decides which leases ran out, so
// the core itself never needs a clock or a timer.
//
// What callers may rely on: ticks never overlap, and a slow tick delays
// the next one rather than queueing several; the first comes one period
// after Start(); Stop() (also the destructor) returns once the thread is
// joined, with no tick running.

#ifndef GAPTRAIN_SERVICES_COORDINATOR_TICK_TIMER_H_
#define GAPTRAIN_SERVICES_COORDINATOR_TICK_TIMER_H_

#include <chrono>
#include <functional>
#include <memory>
#include <thread>

namespace gaptrain {

class TickTimer {
 public:
  TickTimer(std::chrono::milliseconds period, std::function<void()> tick);
  ~TickTimer();

  TickTimer(const TickTimer&) = delete;
  TickTimer& operator=(const TickTimer&) = delete;

  void Start();
  void Stop();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
  std::thread thread_;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_COORDINATOR_TICK_TIMER_H_
