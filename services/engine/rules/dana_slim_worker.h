// DANA-Slim's worker side: the worker keeps its own momentum v and sends
// u = g + γv instead of g, so the master (dana-slim rule) needs only
// x ← x − ηu. `gradient` already includes weight decay λx.

#ifndef GAPTRAIN_SERVICES_ENGINE_RULES_DANA_SLIM_WORKER_H_
#define GAPTRAIN_SERVICES_ENGINE_RULES_DANA_SLIM_WORKER_H_

#include <cstddef>

namespace gaptrain {

// v ← γv + g;  u = g + γv.  One pass; `u` may alias `gradient`.
inline void DanaSlimWorkerStep(float momentum, const float* gradient,
                               float* __restrict velocity, float* u, size_t n) {
  for (size_t j = 0; j < n; ++j) {
    float g = gradient[j];
    float v = momentum * velocity[j] + g;
    velocity[j] = v;
    u[j] = g + momentum * v;
  }
}

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_ENGINE_RULES_DANA_SLIM_WORKER_H_
