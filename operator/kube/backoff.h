// Backoff: the delays between reconnection attempts: exponential from
// `initial`, capped at `max`, each shortened by a random fraction of up to
// `jitter` so that many clients restarting together spread out. The random
// numbers come from `seed`, so a test sees the same delays every run.

#ifndef GAPTRAIN_OPERATOR_KUBE_BACKOFF_H_
#define GAPTRAIN_OPERATOR_KUBE_BACKOFF_H_

#include <chrono>
#include <cstdint>
#include <random>

namespace gaptrain {
namespace kube {

class Backoff {
 public:
  struct Options {
    std::chrono::milliseconds initial{800};
    std::chrono::milliseconds max{30000};
    double factor = 2.0;  // >= 1
    double jitter = 0.5;  // in [0, 1]: a delay lies in [d * (1 - jitter), d]
    uint64_t seed = 1;
  };

  explicit Backoff(const Options& options);

  // The delay before the next attempt; each call grows the next one.
  std::chrono::milliseconds Next();
  // After a success: the next delay is `initial` again.
  void Reset() { attempts_ = 0; }

 private:
  Options options_;
  int attempts_ = 0;
  std::mt19937_64 random_;
};

}  // namespace kube
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_KUBE_BACKOFF_H_
