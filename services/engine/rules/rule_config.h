// RuleConfig: which update rule the master runs and its hyper-parameters, as
// the TrainingJob's spec.training.optimizer / staleness / sync sections say
// (docs/trainingjob.md). ../shared/docs/ALGORITHMS.md, mirrored in
// docs/algorithms.md, defines every symbol.

#ifndef GAPTRAIN_SERVICES_ENGINE_RULES_RULE_CONFIG_H_
#define GAPTRAIN_SERVICES_ENGINE_RULES_RULE_CONFIG_H_

#include <cstdint>
#include <string>

#include "services/base/status.h"

namespace gaptrain {

enum class RuleKind {
  kAsgd,            // "none": plain ASGD (momentum / Nesterov optional)
  kStalenessAware,  // "staleness-aware": g / max(1, τ)
  kGapAware,        // "gap-aware": g / G, G = 1 + |Δ| / C
  kDanaZero,        // "dana-zero": per-worker momenta, look-ahead replies
  kDanaSlim,        // "dana-slim": master x ← x − η u; momentum on the worker
  kGapAwareDana,    // "gap-aware-dana": DANA-Zero with the Gap penalty
  kDcAsgd,          // "dc-asgd": delay compensation g + λ g⊙g⊙Δ
  kSync,            // mode: sync: average the first N gradients of a step
};

// The manifest's spelling ("none", "gap-aware", ..., "sync").
const char* RuleKindName(RuleKind kind);
// Parses the manifest's spelling; the error names the field and lists choices.
Status ParseRuleKind(const std::string& text, RuleKind* kind);

// Where the master finds θ⁽ⁱ⁾, the copy worker i computed its gradient on.
enum class GapSource {
  kSnapshot,  // the master keeps what it sent each worker (+N·P memory)
  kEcho,      // the worker sends its copy back with the gradient (+P upload)
};

enum class GapPrecision { kFloat32, kBfloat16 };

struct RuleConfig {
  RuleKind kind = RuleKind::kAsgd;

  // Shared by every rule: d = g + λθ; v ← γv + d; θ ← θ − ηv.
  float momentum = 0.0f;      // γ; for dana-slim it is the workers' γ
  bool nesterov = false;      // θ ← θ − η(d + γv)
  float weight_decay = 0.0f;  // λ

  // Gap-Aware (gap-aware, gap-aware-dana) and the worker copy of dc-asgd.
  GapSource gap_source = GapSource::kSnapshot;
  GapPrecision gap_precision = GapPrecision::kFloat32;
  bool penalize_weight_decay = true;  // divide (g + λθ) by G, not g alone
  double gap_beta = 0.999;            // β of r ← βr + (1−β)v²
  double gap_epsilon = 1e-8;          // ε of C = η_max(√r̂ + ε)

  // DC-ASGD.
  float dc_lambda = 0.04f;          // λ_dc, or λ₀ when adaptive
  bool dc_adaptive = false;         // λ_t = λ₀ / √(MeanSquare + ε)
  float dc_mean_square_decay = 0.95f;
  float dc_epsilon = 1e-7f;

  // Async: reject pushes staler than this; 0 = unbounded.
  uint64_t max_staleness = 0;

  // Sync: a step averages the first (live workers − backup_workers)
  // gradients, at least one.
  uint32_t backup_workers = 0;

  // Hot loops split over this many threads by contiguous ranges (>= 1).
  int num_threads = 1;

  // True for rules that read θ⁽ⁱ⁾: gap-aware, gap-aware-dana, dc-asgd.
  bool NeedsWorkerCopy() const;

  // Every field in range; the error names the field (as in the manifest).
  Status Validate() const;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_ENGINE_RULES_RULE_CONFIG_H_
