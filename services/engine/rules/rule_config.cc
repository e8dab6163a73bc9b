#include "services/engine/rules/rule_config.h"

#include <cmath>

namespace gaptrain {
namespace {

struct KindName {
  RuleKind kind;
  const char* name;
};

constexpr KindName kKindNames[] = {
    {RuleKind::kAsgd, "none"},
    {RuleKind::kStalenessAware, "staleness-aware"},
    {RuleKind::kGapAware, "gap-aware"},
    {RuleKind::kDanaZero, "dana-zero"},
    {RuleKind::kDanaSlim, "dana-slim"},
    {RuleKind::kGapAwareDana, "gap-aware-dana"},
    {RuleKind::kDcAsgd, "dc-asgd"},
    {RuleKind::kSync, "sync"},
};

Status OutOfRange(const char* field, const std::string& why) {
  return Status::InvalidArgument(std::string(field) + ": " + why);
}

}  // namespace

const char* RuleKindName(RuleKind kind) {
  for (const KindName& k : kKindNames) {
    if (k.kind == kind) return k.name;
  }
  return "unknown";
}

Status ParseRuleKind(const std::string& text, RuleKind* kind) {
  std::string choices;
  for (const KindName& k : kKindNames) {
    if (text == k.name) {
      *kind = k.kind;
      return Status::OK();
    }
    if (!choices.empty()) choices += " | ";
    choices += k.name;
  }
  return Status::InvalidArgument("staleness.rule: unknown rule '" + text +
                                 "' (expected " + choices + ")");
}

bool RuleConfig::NeedsWorkerCopy() const {
  return kind == RuleKind::kGapAware || kind == RuleKind::kGapAwareDana ||
         kind == RuleKind::kDcAsgd;
}

Status RuleConfig::Validate() const {
  if (!(momentum >= 0.0f && momentum < 1.0f)) {
    return OutOfRange("optimizer.momentum", "must be in [0, 1), got " + std::to_string(momentum));
  }
  if (!(weight_decay >= 0.0f && std::isfinite(weight_decay))) {
    return OutOfRange("optimizer.weightDecay", "must be >= 0, got " + std::to_string(weight_decay));
  }
  if (nesterov && momentum == 0.0f) {
    return OutOfRange("optimizer.nesterov", "needs momentum > 0");
  }
  if (nesterov && (kind == RuleKind::kDanaZero || kind == RuleKind::kDanaSlim ||
                   kind == RuleKind::kGapAwareDana)) {
    return OutOfRange("optimizer.nesterov",
                      "DANA rules are already look-ahead; nesterov does not apply");
  }
  if (!(gap_beta > 0.0 && gap_beta < 1.0)) {
    return OutOfRange("staleness.gapBeta", "must be in (0, 1), got " + std::to_string(gap_beta));
  }
  if (!(gap_epsilon > 0.0 && std::isfinite(gap_epsilon))) {
    return OutOfRange("staleness.gapEpsilon", "must be > 0");
  }
  if (!(dc_lambda >= 0.0f && std::isfinite(dc_lambda))) {
    return OutOfRange("staleness.dcLambda", "must be >= 0, got " + std::to_string(dc_lambda));
  }
  if (!(dc_mean_square_decay > 0.0f && dc_mean_square_decay < 1.0f)) {
    return OutOfRange("staleness.dcMeanSquareDecay", "must be in (0, 1)");
  }
  if (!(dc_epsilon > 0.0f)) return OutOfRange("staleness.dcEpsilon", "must be > 0");
  if (num_threads < 1 || num_threads > 256) {
    return OutOfRange("master.updateThreads", "must be in [1, 256], got " + std::to_string(num_threads));
  }
  return Status::OK();
}

}  // namespace gaptrain
