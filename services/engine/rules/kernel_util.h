// Pieces shared by the rules' fused kernels: the momentum step every rule
// ends with, the per-element Gap, dispatch from runtime config to template
// instances (so inner loops carry no branches), and the store names of the
// rules' state.

#ifndef GAPTRAIN_SERVICES_ENGINE_RULES_KERNEL_UTIL_H_
#define GAPTRAIN_SERVICES_ENGINE_RULES_KERNEL_UTIL_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "services/engine/parameter_store.h"
#include "services/engine/rules/rule_config.h"
#include "services/engine/rules/update_rule.h"
#include "services/numeric/bfloat16.h"

namespace gaptrain {

// Store names of rule state (docs/algorithms.md lists them with their sizes).
inline constexpr char kMomentumBuffer[] = "momentum";          // v
inline constexpr char kStepSquareBuffer[] = "gap/step_sq_avg";  // r
inline constexpr char kMomentumSumBuffer[] = "dana/momentum_sum";  // S
inline constexpr char kMeanSquareBuffer[] = "dc/mean_square";
inline constexpr char kGradientSumBuffer[] = "sync/gradient_sum";
inline constexpr char kWorkerMomentum[] = "momentum";  // worker/<id>/momentum
inline constexpr char kWorkerCopy[] = "copy";          // worker/<id>/copy
inline constexpr char kGapFeedsScalar[] = "gap/feeds";      // k
inline constexpr char kGapEtaMaxScalar[] = "gap/eta_max";   // η_max
inline constexpr char kSyncCountScalar[] = "sync/count";

// Compute-heavy kernels (a square root and two divisions per element) are
// compiled three times, for AVX-512, AVX2 and baseline x86-64, and the
// loader picks the best the CPU has. No clone fuses multiply-adds (FMA is
// not enabled for AVX2, and KERNEL_COPTS has -ffp-contract=off, which
// AVX-512 would otherwise use): every clone does the same IEEE operations
// element by element, so parameters do not depend on the node
// (same_bits_test). Only the Gap statistics' float partial sums, whose
// order follows the vector width, may differ in their last bits.
// ThreadSanitizer cannot run the resolver that picks a clone: it runs
// while shared objects are relocated, before the runtime is up, and
// crashes; TSan builds use the baseline code.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__)
#define GAPTRAIN_KERNEL_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define GAPTRAIN_KERNEL_CLONES
#endif

// Blocks of this many elements keep float partial sums accurate and let
// the compiler vectorise the reductions.
inline constexpr size_t kStatsBlock = 2048;

enum class StepKind { kPlain, kHeavyBall, kNesterov };

inline StepKind StepKindOf(const RuleConfig& c) {
  if (c.momentum == 0.0f) return StepKind::kPlain;
  return c.nesterov ? StepKind::kNesterov : StepKind::kHeavyBall;
}

// The ASGD step for element j given d: v ← γv + d; θ ← θ − η·v (heavy ball)
// or θ ← θ − η(d + γv) (Nesterov) or θ ← θ − η·d (plain, v unused).
// Returns the momentum of this step (d for plain).
template <StepKind K>
inline float MomentumStep(float d, float* v, float* theta, size_t j, float lr,
                          float momentum) {
  if constexpr (K == StepKind::kPlain) {
    theta[j] -= lr * d;
    return d;
  } else {
    float v_new = momentum * v[j] + d;
    v[j] = v_new;
    theta[j] -= lr * (K == StepKind::kNesterov ? d + momentum * v_new : v_new);
    return v_new;
  }
}

// DANA-Zero's step for element j given d, on the pushing worker's momentum
// v⁽ⁱ⁾ (vi) and the sum S of every worker's momentum (s):
// v_new = γv⁽ⁱ⁾ + d; θ ← θ − η·v_new; S ← S + v_new − v⁽ⁱ⁾; v⁽ⁱ⁾ ← v_new.
// Returns v_new.
inline float DanaStep(float d, float* vi, float* s, float* theta, size_t j, float lr,
                      float momentum) {
  const float v_old = vi[j];
  const float v_new = momentum * v_old + d;
  theta[j] -= lr * v_new;
  s[j] += v_new - v_old;
  vi[j] = v_new;
  return v_new;
}

// Calls fn(std::integral_constant<StepKind, K>{}) for the config's step.
template <class Fn>
void DispatchStep(StepKind kind, Fn&& fn) {
  switch (kind) {
    case StepKind::kPlain:
      fn(std::integral_constant<StepKind, StepKind::kPlain>{});
      break;
    case StepKind::kHeavyBall:
      fn(std::integral_constant<StepKind, StepKind::kHeavyBall>{});
      break;
    case StepKind::kNesterov:
      fn(std::integral_constant<StepKind, StepKind::kNesterov>{});
      break;
  }
}

// Calls fn(const float*) or fn(const bf16_t*) for the worker copy.
template <class Fn>
void DispatchCopy(const WorkerCopyView& copy, Fn&& fn) {
  if (copy.dtype == DType::kBfloat16) {
    fn(copy.bf16());
  } else {
    fn(copy.f32());
  }
}

// Per-push constants of the Gap: G = 1 + |θ − θ⁽ⁱ⁾| / C with
// C = η_max(√(r·bias_correction) + ε). `enabled` is 0 before r has been
// fed (k = 0), making G = 1.
struct GapParams {
  float eta_max = 0.0f;
  float bias_correction = 0.0f;  // 1 / (1 − β^k)
  float epsilon = 0.0f;
  float enabled = 0.0f;
  float beta = 0.0f;
};

// How far θ moved since the worker's copy of it, |θ − θ⁽ⁱ⁾|. A copy kept
// or sent as bf16 is θ⁽ⁱ⁾ rounded to nearest, within half a bf16 ulp of
// the true value: that rounding is transport, not movement, so it is taken
// off (never below 0). A copy of a θ that did not move then gives 0 and
// G = 1, where the raw difference made bf16 copies look like a move of
// about 2⁻⁹|θ|, many times C (docs/reliability.md, "The Gap and bf16").
inline float CopyDistance(float theta, const float* copy, size_t j) {
  return std::fabs(theta - copy[j]);
}
inline float CopyDistance(float theta, const bf16_t* copy, size_t j) {
  const uint32_t bits = static_cast<uint32_t>(copy[j]) << 16;
  float value;
  std::memcpy(&value, &bits, sizeof value);
  // Half an ulp of a bf16 with exponent bits e is 2^(e - 127 - 8): the same
  // exponent field less 8. Subnormal and tiny copies (e <= 8) get 0.
  const uint32_t exponent = bits & 0x7F800000u;
  const uint32_t half_ulp_bits = exponent > (8u << 23) ? exponent - (8u << 23) : 0u;
  float half_ulp;
  std::memcpy(&half_ulp, &half_ulp_bits, sizeof half_ulp);
  // Not std::fmax: GCC calls libm's fmaxf for it (its NaN rule), and a call
  // in the loop keeps the whole kernel scalar (8x slower, docs/performance.md).
  const float distance = std::fabs(theta - value) - half_ulp;
  return distance > 0.0f ? distance : 0.0f;
}

// G = 1 + distance / C, for distance = CopyDistance(θ, copy).
inline float GapOf(float distance, float r, const GapParams& p) {
  float c = p.eta_max * (std::sqrt(r * p.bias_correction) + p.epsilon);
  return 1.0f + (p.enabled * distance) / c;
}

// The Gap-penalised direction of one parameter: G (into *gap), then
// d = (g + λθ)/G, or g/G + λθ when weight decay is not penalised.
// `distance` is CopyDistance(θ, copy).
template <bool kPenalizeWeightDecay>
inline float PenalisedDirection(float g, float theta, float distance, float r, float weight_decay,
                                const GapParams& p, float* gap, float* inv_gap) {
  *gap = GapOf(distance, r, p);
  *inv_gap = 1.0f / *gap;
  return kPenalizeWeightDecay ? (g + weight_decay * theta) * *inv_gap
                              : g * *inv_gap + weight_decay * theta;
}

// Raises η_max to `learning_rate` and derives this push's GapParams from
// the number of r feeds so far (both kept as store scalars).
GapParams BeginGapStep(const RuleConfig& config, double learning_rate,
                       ParameterStore* store);
// Counts the r feed the kernel just made.
void EndGapStep(ParameterStore* store);

// Adds an fp32 buffer of P elements named `name` unless the store has it.
FlatBuffer* EnsureBuffer(ParameterStore* store, const char* name);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_ENGINE_RULES_KERNEL_UTIL_H_
