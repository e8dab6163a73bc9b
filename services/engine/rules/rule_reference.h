// Reference implementations of every master update rule, written from
// ../shared/docs/ALGORITHMS.md and the implementer's documented choices, for
// differential tests against UpdateEngine. Deliberately plain: scalar loops
// over std::vector<float>, one struct per rule owning its state, no sharing
// with the production code (not even the schedule).
//
// Arithmetic mirrors what a float32 implementation does (state in float,
// per-element math in float, bias correction and C in double), so the
// engine and the reference agree to a few ulps; tests compare with a
// relative tolerance.

#ifndef GAPTRAIN_SERVICES_ENGINE_RULES_RULE_REFERENCE_H_
#define GAPTRAIN_SERVICES_ENGINE_RULES_RULE_REFERENCE_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace gaptrain {
namespace testing {

using Vec = std::vector<float>;

// ------------------------------------------------------------ helpers

// bf16 round to nearest, ties to even, written independently of
// services/numeric/bfloat16.h.
inline float RefRoundBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  const uint32_t low = bits & 0xFFFFu;
  uint32_t high = bits >> 16;
  if (low > 0x8000u || (low == 0x8000u && (high & 1u))) ++high;
  const uint32_t out = high << 16;
  float r;
  std::memcpy(&r, &out, sizeof r);
  return r;
}

inline Vec RefRoundBf16(const Vec& v) {
  Vec out(v.size());
  for (size_t j = 0; j < v.size(); ++j) out[j] = RefRoundBf16(v[j]);
  return out;
}

// |θ − copy|, less half a bf16 ulp of the copy when it is a bf16-rounded
// value (its rounding is not movement), never below 0. Written from the
// definition: the spacing of bf16 values around |copy| is 2^(⌊log2|copy|⌋ − 7).
inline double RefCopyDistance(float theta, float copy, bool copy_is_bf16) {
  const double delta = std::fabs(static_cast<double>(theta) - static_cast<double>(copy));
  if (!copy_is_bf16 || copy == 0.0f) return delta;
  int exponent = 0;
  std::frexp(static_cast<double>(copy), &exponent);  // |copy| = m * 2^exponent, m in [0.5, 1)
  const double ulp = std::ldexp(1.0, exponent - 1 - 7);
  return std::max(0.0, delta - ulp / 2);
}

// Learning-rate schedule: linear warm-up from lr*factor to lr over
// warmup_updates, then x decay at each fraction of total_updates.
struct RefSchedule {
  double lr = 0.1;
  uint64_t warmup_updates = 0;
  double warmup_start_factor = 1.0;
  std::vector<double> decay_at_fractions;
  double decay_factor = 0.1;
  uint64_t total_updates = 0;

  double At(uint64_t u) const {
    double rate = lr;
    if (u < warmup_updates) {
      const double t = static_cast<double>(u) / static_cast<double>(warmup_updates);
      rate = lr * (warmup_start_factor + (1.0 - warmup_start_factor) * t);
    }
    for (double f : decay_at_fractions) {
      if (static_cast<double>(u) >= f * static_cast<double>(total_updates)) rate *= decay_factor;
    }
    return rate;
  }
};

// Per-tensor element ranges [begin, end).
struct RefRange {
  size_t begin = 0;
  size_t end = 0;
};

struct RefGapStats {
  double gap_mean = 1.0;
  double gap_max = 1.0;
  double penalty_mean = 1.0;
  double penalised_fraction = 0.0;
  // Elements with G within 1e-3 of kPenalisedGap = 2, where float rounding
  // may decide either way (e.g. GA's first stale push with τ = 1 puts every
  // G at exactly 2 in exact arithmetic).
  size_t near_threshold = 0;
};

// Statistics of a Gap vector over [begin, end), computed in double.
inline RefGapStats RefComputeGapStats(const std::vector<double>& gap, size_t begin, size_t end) {
  RefGapStats s;
  if (end <= begin) return s;
  double sum = 0.0, inv = 0.0, mx = 1.0;
  size_t penalised = 0;
  for (size_t j = begin; j < end; ++j) {
    sum += gap[j];
    inv += 1.0 / gap[j];
    mx = std::max(mx, gap[j]);
    if (gap[j] >= 2.0) ++penalised;
    if (std::fabs(gap[j] - 2.0) <= 1e-3) ++s.near_threshold;
  }
  const double n = static_cast<double>(end - begin);
  s.gap_mean = sum / n;
  s.gap_max = mx;
  s.penalty_mean = inv / n;
  s.penalised_fraction = static_cast<double>(penalised) / n;
  return s;
}

// What a reference push did, mirroring ApplyStats.
struct RefStats {
  enum class Outcome { kApplied, kAccumulated, kDiscardedLate, kDuplicate };
  Outcome outcome = Outcome::kApplied;
  double learning_rate = 0.0;
  double penalty_mean = 1.0;
  bool has_gap = false;
  RefGapStats gap;
  std::vector<RefGapStats> per_tensor;
  uint32_t aggregated = 0;
};

inline void RefFillGapStats(const std::vector<double>& gap, const std::vector<RefRange>& ranges,
                            RefStats* stats) {
  stats->has_gap = true;
  stats->gap = RefComputeGapStats(gap, 0, gap.size());
  stats->penalty_mean = stats->gap.penalty_mean;
  stats->per_tensor.clear();
  for (const RefRange& r : ranges) {
    stats->per_tensor.push_back(RefComputeGapStats(gap, r.begin, r.end));
  }
}

// One push as the reference rules see it.
struct RefPush {
  uint32_t worker = 0;
  const Vec* gradient = nullptr;
  const Vec* copy = nullptr;  // θ⁽ⁱ⁾ as the master reads it (bf16-rounded if so stored)
  bool copy_is_bf16 = false;  // then the Gap discounts the rounding (RefCopyDistance)
  uint64_t staleness = 0;
  double learning_rate = 0.0;
  size_t live_workers = 0;
};

// Common interface so one harness can drive every rule.
class RefRule {
 public:
  explicit RefRule(Vec theta) : theta(std::move(theta)) {}
  virtual ~RefRule() = default;

  Vec theta;  // the model

  virtual void Join(uint32_t /*worker*/) {}
  // Returns true when the leave completed a (sync) step; *stats then says so.
  virtual bool Leave(uint32_t /*worker*/, size_t /*live_after*/, double /*lr*/,
                     RefStats* /*stats*/) {
    return false;
  }
  virtual Vec Reply(uint32_t /*worker*/, double /*lr*/) const { return theta; }
  virtual RefStats Push(const RefPush& push) = 0;
  // Floats of rule state (P-proportional), not counting θ.
  virtual size_t StateFloats() const = 0;
};

// --------------------------------------------------------------- ASGD

struct AsgdRef : RefRule {
  float momentum, weight_decay;
  bool nesterov;
  Vec v;

  AsgdRef(Vec theta0, float momentum, bool nesterov, float weight_decay)
      : RefRule(std::move(theta0)),
        momentum(momentum),
        weight_decay(weight_decay),
        nesterov(nesterov),
        v(momentum > 0.0f ? theta.size() : 0, 0.0f) {}

  // d = scale*g + wd*theta; v = mom*v + d; theta -= lr*(nesterov ? d+mom*v : v).
  void Step(const Vec& g, float scale, double lr) {
    const float eta = static_cast<float>(lr);
    for (size_t j = 0; j < theta.size(); ++j) {
      const float d = scale * g[j] + weight_decay * theta[j];
      if (momentum > 0.0f) {
        const float vn = momentum * v[j] + d;
        v[j] = vn;
        const float step = nesterov ? d + momentum * vn : vn;
        theta[j] -= eta * step;
      } else {
        theta[j] -= eta * d;
      }
    }
  }

  RefStats Push(const RefPush& p) override {
    Step(*p.gradient, 1.0f, p.learning_rate);
    RefStats s;
    s.learning_rate = p.learning_rate;
    return s;
  }
  size_t StateFloats() const override { return v.size(); }
};

// ----------------------------------------------------------------- SA

struct StalenessAwareRef : RefRule {
  float momentum, weight_decay;
  bool nesterov;
  Vec v;

  StalenessAwareRef(Vec theta0, float momentum, bool nesterov, float weight_decay)
      : RefRule(std::move(theta0)),
        momentum(momentum),
        weight_decay(weight_decay),
        nesterov(nesterov),
        v(momentum > 0.0f ? theta.size() : 0, 0.0f) {}

  // d = g / max(1, τ) + λθ (weight decay not scaled), then the ASGD step.
  RefStats Push(const RefPush& p) override {
    const Vec& g = *p.gradient;
    const uint64_t tau = std::max<uint64_t>(1, p.staleness);
    const float divisor = static_cast<float>(tau);
    const float eta = static_cast<float>(p.learning_rate);
    for (size_t j = 0; j < theta.size(); ++j) {
      const float d = g[j] / divisor + weight_decay * theta[j];
      if (momentum > 0.0f) {
        const float vn = momentum * v[j] + d;
        v[j] = vn;
        theta[j] -= eta * (nesterov ? d + momentum * vn : vn);
      } else {
        theta[j] -= eta * d;
      }
    }
    RefStats s;
    s.learning_rate = p.learning_rate;
    s.penalty_mean = 1.0 / static_cast<double>(tau);
    return s;
  }
  size_t StateFloats() const override { return v.size(); }
};

// ----------------------------------------------------------------- GA

struct GapAwareRef : RefRule {
  float momentum, weight_decay;
  bool nesterov, penalize_weight_decay;
  double beta, epsilon;
  std::vector<RefRange> ranges;
  // Negative control for tests: when false, C uses the current η instead of
  // η_max (what the engine must NOT do).
  bool track_eta_max = true;

  Vec v, r;
  uint64_t k = 0;
  double eta_max = 0.0;

  GapAwareRef(Vec theta0, float momentum, bool nesterov, float weight_decay,
              bool penalize_weight_decay, double beta, double epsilon,
              std::vector<RefRange> ranges)
      : RefRule(std::move(theta0)),
        momentum(momentum),
        weight_decay(weight_decay),
        nesterov(nesterov),
        penalize_weight_decay(penalize_weight_decay),
        beta(beta),
        epsilon(epsilon),
        ranges(std::move(ranges)),
        v(momentum > 0.0f ? theta.size() : 0, 0.0f),
        r(theta.size(), 0.0f) {}

  // G per element for copy θ⁽ⁱ⁾ (θ before this update). eta_max already updated.
  std::vector<double> Gap(const Vec& copy, bool copy_is_bf16, double lr) const {
    std::vector<double> gap(theta.size(), 1.0);
    if (k == 0) return gap;
    const double bias = 1.0 - std::pow(beta, static_cast<double>(k));
    const double eta = track_eta_max ? eta_max : lr;
    for (size_t j = 0; j < theta.size(); ++j) {
      const double r_hat = static_cast<double>(r[j]) / bias;
      const double c = eta * (std::sqrt(r_hat) + epsilon);
      const double delta = RefCopyDistance(theta[j], copy[j], copy_is_bf16);
      gap[j] = 1.0 + delta / c;
    }
    return gap;
  }

  RefStats Push(const RefPush& p) override {
    const Vec& g = *p.gradient;
    eta_max = std::max(eta_max, p.learning_rate);
    const std::vector<double> gap = Gap(*p.copy, p.copy_is_bf16, p.learning_rate);
    const float eta = static_cast<float>(p.learning_rate);
    const float one_minus_beta = static_cast<float>(1.0 - beta);
    const float b = static_cast<float>(beta);
    for (size_t j = 0; j < theta.size(); ++j) {
      const float G = static_cast<float>(gap[j]);
      const float d = penalize_weight_decay ? (g[j] + weight_decay * theta[j]) / G
                                            : g[j] / G + weight_decay * theta[j];
      float fed;
      if (momentum > 0.0f) {
        const float vn = momentum * v[j] + d;
        v[j] = vn;
        theta[j] -= eta * (nesterov ? d + momentum * vn : vn);
        fed = vn;
      } else {
        theta[j] -= eta * d;
        fed = g[j];
      }
      r[j] = b * r[j] + one_minus_beta * fed * fed;
    }
    ++k;
    RefStats s;
    s.learning_rate = p.learning_rate;
    RefFillGapStats(gap, ranges, &s);
    return s;
  }
  size_t StateFloats() const override { return v.size() + r.size(); }
};

// ---------------------------------------------------------- DANA-Zero

struct DanaZeroRef : RefRule {
  float momentum, weight_decay;
  std::map<uint32_t, Vec> v;  // per worker
  Vec S;

  DanaZeroRef(Vec theta0, float momentum, float weight_decay)
      : RefRule(std::move(theta0)),
        momentum(momentum),
        weight_decay(weight_decay),
        S(theta.size(), 0.0f) {}

  void Join(uint32_t w) override { v[w] = Vec(theta.size(), 0.0f); }
  bool Leave(uint32_t w, size_t, double, RefStats*) override {
    const Vec& vi = v.at(w);
    for (size_t j = 0; j < S.size(); ++j) S[j] -= vi[j];
    v.erase(w);
    return false;
  }
  Vec Reply(uint32_t, double lr) const override {
    const float c = static_cast<float>(lr * static_cast<double>(momentum));
    Vec out(theta.size());
    for (size_t j = 0; j < theta.size(); ++j) out[j] = theta[j] - c * S[j];
    return out;
  }
  RefStats Push(const RefPush& p) override {
    const Vec& g = *p.gradient;
    Vec& vi = v.at(p.worker);
    const float eta = static_cast<float>(p.learning_rate);
    for (size_t j = 0; j < theta.size(); ++j) {
      const float d = g[j] + weight_decay * theta[j];
      const float vn = momentum * vi[j] + d;
      theta[j] -= eta * vn;
      S[j] += vn - vi[j];
      vi[j] = vn;
    }
    RefStats s;
    s.learning_rate = p.learning_rate;
    return s;
  }
  size_t StateFloats() const override { return S.size() * (1 + v.size()); }
};

// ---------------------------------------------------------- DANA-Slim

// Master: x ← x − η u. Nothing else.
struct DanaSlimRef : RefRule {
  explicit DanaSlimRef(Vec x0) : RefRule(std::move(x0)) {}
  RefStats Push(const RefPush& p) override {
    const Vec& u = *p.gradient;
    const float eta = static_cast<float>(p.learning_rate);
    for (size_t j = 0; j < theta.size(); ++j) theta[j] -= eta * u[j];
    RefStats s;
    s.learning_rate = p.learning_rate;
    return s;
  }
  size_t StateFloats() const override { return 0; }
};

// Worker side of DANA-Slim: g already includes λx.
struct DanaSlimWorkerRef {
  float momentum = 0.0f;
  Vec v;
  Vec MakeUpdate(const Vec& g) {
    if (v.empty()) v.assign(g.size(), 0.0f);
    Vec u(g.size());
    for (size_t j = 0; j < g.size(); ++j) {
      v[j] = momentum * v[j] + g[j];
      u[j] = g[j] + momentum * v[j];
    }
    return u;
  }
};

// ---------------------------------------------------------- GA + DANA

// DANA-Zero's state, membership and look-ahead reply, with the Gap penalty
// on each worker's direction.
struct GapAwareDanaRef : DanaZeroRef {
  bool penalize_weight_decay;
  double beta, epsilon;
  std::vector<RefRange> ranges;
  Vec r;
  uint64_t k = 0;
  double eta_max = 0.0;

  GapAwareDanaRef(Vec theta0, float momentum, float weight_decay, bool penalize_weight_decay,
                  double beta, double epsilon, std::vector<RefRange> ranges)
      : DanaZeroRef(std::move(theta0), momentum, weight_decay),
        penalize_weight_decay(penalize_weight_decay),
        beta(beta),
        epsilon(epsilon),
        ranges(std::move(ranges)),
        r(theta.size(), 0.0f) {}

  RefStats Push(const RefPush& p) override {
    const Vec& g = *p.gradient;
    const Vec& copy = *p.copy;
    Vec& vi = v.at(p.worker);
    eta_max = std::max(eta_max, p.learning_rate);
    std::vector<double> gap(theta.size(), 1.0);
    if (k > 0) {
      const double bias = 1.0 - std::pow(beta, static_cast<double>(k));
      for (size_t j = 0; j < theta.size(); ++j) {
        const double c = eta_max * (std::sqrt(static_cast<double>(r[j]) / bias) + epsilon);
        gap[j] = 1.0 + RefCopyDistance(theta[j], copy[j], p.copy_is_bf16) / c;
      }
    }
    const float eta = static_cast<float>(p.learning_rate);
    const float b = static_cast<float>(beta);
    const float one_minus_beta = static_cast<float>(1.0 - beta);
    for (size_t j = 0; j < theta.size(); ++j) {
      const float G = static_cast<float>(gap[j]);
      const float d = penalize_weight_decay ? (g[j] + weight_decay * theta[j]) / G
                                            : g[j] / G + weight_decay * theta[j];
      const float vn = momentum * vi[j] + d;
      theta[j] -= eta * vn;
      S[j] += vn - vi[j];
      vi[j] = vn;
      r[j] = b * r[j] + one_minus_beta * vn * vn;
    }
    ++k;
    RefStats s;
    s.learning_rate = p.learning_rate;
    RefFillGapStats(gap, ranges, &s);
    return s;
  }
  size_t StateFloats() const override { return S.size() * (2 + v.size()); }
};

// ------------------------------------------------------------ DC-ASGD

struct DcAsgdRef : RefRule {
  float momentum, weight_decay;
  bool nesterov;
  float lambda;
  bool adaptive;
  float decay, eps;
  Vec v, ms;

  DcAsgdRef(Vec theta0, float momentum, bool nesterov, float weight_decay, float lambda,
            bool adaptive, float decay, float eps)
      : RefRule(std::move(theta0)),
        momentum(momentum),
        weight_decay(weight_decay),
        nesterov(nesterov),
        lambda(lambda),
        adaptive(adaptive),
        decay(decay),
        eps(eps),
        v(momentum > 0.0f ? theta.size() : 0, 0.0f),
        ms(adaptive ? theta.size() : 0, 0.0f) {}

  RefStats Push(const RefPush& p) override {
    const Vec& g = *p.gradient;
    const Vec& copy = *p.copy;
    const float eta = static_cast<float>(p.learning_rate);
    for (size_t j = 0; j < theta.size(); ++j) {
      float lam = lambda;
      if (adaptive) {
        ms[j] = decay * ms[j] + (1.0f - decay) * g[j] * g[j];
        lam = lambda / std::sqrt(ms[j] + eps);
      }
      const float gc = g[j] + lam * g[j] * g[j] * (theta[j] - copy[j]);
      const float d = gc + weight_decay * theta[j];
      if (momentum > 0.0f) {
        const float vn = momentum * v[j] + d;
        v[j] = vn;
        theta[j] -= eta * (nesterov ? d + momentum * vn : vn);
      } else {
        theta[j] -= eta * d;
      }
    }
    RefStats s;
    s.learning_rate = p.learning_rate;
    return s;
  }
  size_t StateFloats() const override { return v.size() + ms.size(); }
};

// --------------------------------------------------------------- Sync

// Averages the first max(1, live − backups) gradients tagged with the
// current step, then one ASGD step. Late gradients (τ > 0) are discarded;
// a second gradient from the same worker for the step is a duplicate.
struct SyncRef : RefRule {
  float momentum, weight_decay;
  bool nesterov;
  uint32_t backups;
  Vec v, sum;
  std::set<uint32_t> pushed;

  SyncRef(Vec theta0, float momentum, bool nesterov, float weight_decay, uint32_t backups)
      : RefRule(std::move(theta0)),
        momentum(momentum),
        weight_decay(weight_decay),
        nesterov(nesterov),
        backups(backups),
        v(momentum > 0.0f ? theta.size() : 0, 0.0f),
        sum(theta.size(), 0.0f) {}

  size_t Required(size_t live) const {
    return live > backups ? std::max<size_t>(1, live - backups) : 1;
  }

  void Step(double lr, RefStats* s) {
    const float n = static_cast<float>(pushed.size());
    const float eta = static_cast<float>(lr);
    for (size_t j = 0; j < theta.size(); ++j) {
      const float d = sum[j] / n + weight_decay * theta[j];
      if (momentum > 0.0f) {
        const float vn = momentum * v[j] + d;
        v[j] = vn;
        theta[j] -= eta * (nesterov ? d + momentum * vn : vn);
      } else {
        theta[j] -= eta * d;
      }
      sum[j] = 0.0f;
    }
    s->outcome = RefStats::Outcome::kApplied;
    s->aggregated = static_cast<uint32_t>(pushed.size());
    s->learning_rate = lr;
    pushed.clear();
  }

  RefStats Push(const RefPush& p) override {
    RefStats s;
    if (p.staleness > 0) {
      s.outcome = RefStats::Outcome::kDiscardedLate;
      return s;
    }
    if (pushed.count(p.worker)) {
      s.outcome = RefStats::Outcome::kDuplicate;
      return s;
    }
    const Vec& g = *p.gradient;
    for (size_t j = 0; j < sum.size(); ++j) sum[j] += g[j];
    pushed.insert(p.worker);
    if (pushed.size() >= Required(p.live_workers)) {
      Step(p.learning_rate, &s);
    } else {
      s.outcome = RefStats::Outcome::kAccumulated;
    }
    return s;
  }

  // Only for a leaver that has not pushed in the pending step (the harness
  // keeps it so): its gradient is not in the sum.
  bool Leave(uint32_t w, size_t live_after, double lr, RefStats* s) override {
    pushed.erase(w);
    if (!pushed.empty() && pushed.size() >= Required(live_after)) {
      Step(lr, s);
      return true;
    }
    return false;
  }
  size_t StateFloats() const override { return v.size() + sum.size(); }
};

}  // namespace testing
}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_ENGINE_RULES_RULE_REFERENCE_H_
