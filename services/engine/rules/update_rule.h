// UpdateRule: how the master applies one worker's gradient to θ. One rule per
// file (asgd_rule.h, gap_aware_rule.h, ...), each a single fused pass over
// the flat buffers. Rules keep all their state in the ParameterStore so a
// checkpoint needs no rule-specific code.
//
// The UpdateEngine validates every push (size, finiteness, worker, version)
// before a rule sees it, so rules never fail.

#ifndef GAPTRAIN_SERVICES_ENGINE_RULES_UPDATE_RULE_H_
#define GAPTRAIN_SERVICES_ENGINE_RULES_UPDATE_RULE_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "services/engine/apply_stats.h"
#include "services/engine/flat_buffer.h"
#include "services/engine/gradient_view.h"
#include "services/engine/parameter_store.h"
#include "services/engine/rules/rule_config.h"

namespace gaptrain {

// A read-only view of θ⁽ⁱ⁾ in float32 or bf16 (a snapshot or an echo).
struct WorkerCopyView {
  DType dtype = DType::kFloat32;
  const void* data = nullptr;  // nullptr: none
  const float* f32() const { return static_cast<const float*>(data); }
  const bf16_t* bf16() const { return static_cast<const bf16_t*>(data); }
};

// One validated push, as a rule sees it.
struct PushContext {
  WorkerId worker = 0;
  GradientView gradient;            // P finite values
  WorkerCopyView copy;              // set when the rule NeedsWorkerCopy()
  uint64_t staleness = 0;           // τ = t − s
  uint64_t base_version = 0;        // s
  double learning_rate = 0.0;       // η for this master step
  size_t live_workers = 0;          // joined workers, this one included
};

class UpdateRule {
 public:
  virtual ~UpdateRule() = default;

  const RuleConfig& config() const { return config_; }

  // Creates the rule's shared state in a fresh store (momentum, running
  // means). A store restored from a checkpoint already has it.
  virtual void InitState(ParameterStore* store) const = 0;

  // Per-worker state: created when a worker joins, released when it leaves.
  virtual void AddWorker(WorkerId worker, ParameterStore* store) const;
  virtual void RemoveWorker(WorkerId worker, ParameterStore* store) const;

  // Writes the point worker `worker` should compute its next gradient on:
  // θ for most rules, DANA's look-ahead θ − ηγS for the DANA rules.
  virtual void WriteReply(WorkerId worker, double learning_rate,
                          const ParameterStore& store, float* out) const;

  // Applies one validated push. Sets stats->outcome: kApplied means θ
  // changed; the engine then advances the version.
  virtual void Apply(const PushContext& push, ParameterStore* store,
                     ApplyStats* stats) = 0;

  // Sync only: membership shrank to `live_workers`; completes the pending
  // step if it now has enough gradients. Returns true when it applied one.
  virtual bool OnMembershipChange(size_t live_workers, double learning_rate,
                                  ParameterStore* store, ApplyStats* stats);

 protected:
  explicit UpdateRule(const RuleConfig& config) : config_(config) {}

 private:
  RuleConfig config_;
};

// The rule `config.kind` names; `config` must be valid.
std::unique_ptr<UpdateRule> CreateUpdateRule(const RuleConfig& config);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_ENGINE_RULES_UPDATE_RULE_H_
