#include "cli/simulator/batch_time.h"

#include <cmath>

namespace gaptrain {

BatchTimeSampler::BatchTimeSampler(double shape, double mean, uint64_t seed)
    : shape_(shape), mean_(mean), rng_(seed, /*stream=*/0x74696d65 /* "time" */) {}

double BatchTimeSampler::Uniform() {
  // 53 random bits, never exactly 0.
  return (static_cast<double>(rng_.Next() >> 11) + 0.5) * 0x1.0p-53;
}

double BatchTimeSampler::Normal() {
  // Box-Muller; one of the pair is enough here.
  double u1 = Uniform();
  double u2 = Uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

double BatchTimeSampler::StandardGamma(double shape) {
  if (shape < 1.0) {
    // Gamma(k) = Gamma(k + 1) · U^(1/k).
    return StandardGamma(shape + 1.0) * std::pow(Uniform(), 1.0 / shape);
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x = Normal();
    double v = 1.0 + c * x;
    if (v <= 0.0) continue;
    v = v * v * v;
    double u = Uniform();
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
}

double BatchTimeSampler::Draw(double slowdown) {
  return StandardGamma(shape_) * (mean_ / shape_) * slowdown;
}

}  // namespace gaptrain
