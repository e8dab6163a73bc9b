#include "services/autoscale/autoscale_policy.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>

namespace gaptrain {
namespace {

// Growth aims this far under maxGap (as a share of maxGap − 1), so noise in
// the next window does not undo it.
constexpr double kGrowthMargin = 0.9;

std::string Fixed(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

std::string Trainers(uint32_t from, uint32_t to) {
  return std::to_string(from) + " -> " + std::to_string(to) + " trainers";
}

// The Gap expected at n trainers from G measured at n0 (n0 >= 2): G − 1
// grows with the staleness, about n − 1.
double ProjectedGap(double gap, uint32_t n0, uint32_t n) {
  return 1 + (gap - 1) * (static_cast<double>(n) - 1) / (static_cast<double>(n0) - 1);
}

// The largest n with ProjectedGap(gap, n0, n) <= bound (n0 >= 2, gap > 1).
uint32_t LargestUnder(double bound, double gap, uint32_t n0) {
  const double n = 1 + (bound - 1) * (static_cast<double>(n0) - 1) / (gap - 1);
  return n >= 1e9 ? 1000000000u : static_cast<uint32_t>(std::floor(n + 1e-9));
}

AutoscaleDecision Decide(AutoscaleDecision::Action action, uint32_t replicas, std::string message) {
  AutoscaleDecision d;
  d.action = action;
  d.replicas = replicas;
  d.message = std::move(message);
  return d;
}

}  // namespace

const char* AutoscaleDecision::Reason() const {
  switch (action) {
    case Action::kGrow:
      return "ScaledUp";
    case Action::kShrink:
      return "ScaledDown";
    case Action::kHold:
      break;
  }
  return "Holding";
}

bool MeasureWindow(const AutoscaleReading& start, const AutoscaleReading& now, uint32_t replicas,
                   uint32_t running, AutoscaleWindow* window) {
  if (now.seconds < start.seconds || now.model_version < start.model_version ||
      now.gap_sum < start.gap_sum || now.gap_count < start.gap_count) {
    return false;
  }
  window->replicas = replicas;
  window->running = std::min(running, replicas);
  const uint64_t preempted = now.preemptions - std::min(now.preemptions, start.preemptions);
  window->preemptions = static_cast<uint32_t>(std::min<uint64_t>(preempted, UINT32_MAX));
  window->seconds = now.seconds - start.seconds;
  window->updates = now.model_version - start.model_version;
  window->gap_sum = now.gap_sum - start.gap_sum;
  window->gap_count = now.gap_count - start.gap_count;
  return true;
}

AutoscaleDecision DecideTrainers(const WorkersSpec& workers, const AutoscaleWindow& window,
                                 AutoscaleMemory* memory) {
  using Action = AutoscaleDecision::Action;
  const AutoscaleSpec& spec = workers.autoscale;
  const uint32_t floor = workers.Floor(), ceiling = workers.Ceiling();
  const uint32_t n = window.replicas;

  // Outside the range (scaled by hand, or the range changed): into it.
  if (n < floor || n > ceiling) {
    memory->grown_from = 0;
    const uint32_t to = std::clamp(n, floor, ceiling);
    return Decide(to > n ? Action::kGrow : Action::kShrink, to,
                  "outside [" + std::to_string(floor) + ", " + std::to_string(ceiling) +
                      "]: " + Trainers(n, to));
  }
  // 1. Nothing measured.
  if (window.gap_count <= 0) {
    return Decide(Action::kHold, n,
                  "no push measured in the last " + Fixed(window.seconds, 0) + " s: holding at " +
                      std::to_string(n) + " trainers");
  }
  const double gap = window.MeanGap();
  const double rate = window.UpdatesPerSecond();
  const std::string measured = "Gap " + Fixed(gap, 2);

  // 2. Too stale.
  if (gap > spec.max_gap && n > floor) {
    // n > floor >= 1, so n >= 2.
    const uint32_t to = std::clamp(LargestUnder(spec.max_gap, gap, n), floor, n - 1);
    memory->grown_from = 0;
    return Decide(Action::kShrink, to,
                  measured + " is above maxGap " + Fixed(spec.max_gap, 2) + " (projected " +
                      Fixed(ProjectedGap(gap, n, to), 2) + " at " + std::to_string(to) +
                      "): " + Trainers(n, to));
  }
  // 3. The window did not see N trainers at work.
  if (window.running < n || window.preemptions > 0) {
    std::string why;
    if (window.running < n) {
      why = std::to_string(n - window.running) + " of " + std::to_string(n) +
            " trainers not running (Pending or being replaced)";
    } else {
      why = std::to_string(window.preemptions) + " trainer" + (window.preemptions == 1 ? "" : "s") +
            " preempted in the window";
    }
    return Decide(Action::kHold, n, why + ": holding at " + std::to_string(n) + " trainers");
  }
  // 4. Did the last growth pay?
  if (memory->grown_from > 0 && memory->grown_from < n && memory->rate_before > 0) {
    const uint32_t before = memory->grown_from;
    const double per_trainer = memory->rate_before / before;
    const double gain = (rate - memory->rate_before) / (n - before);
    memory->grown_from = 0;
    if (gain < spec.min_gain * per_trainer) {
      memory->unprofitable = memory->unprofitable == 0 ? n : std::min(memory->unprofitable, n);
      const uint32_t to = std::max(before, floor);
      return Decide(Action::kShrink, to,
                    std::to_string(n) + " trainers gave " + Fixed(rate, 1) + " updates/s, " +
                        std::to_string(before) + " gave " + Fixed(memory->rate_before, 1) + ": " +
                        Fixed(gain, 2) + " per added trainer, under minGain " +
                        Fixed(spec.min_gain, 2) + " of " + Fixed(per_trainer, 2) + ": " +
                        Trainers(n, to));
    }
  }
  // 5. Room to grow.
  uint32_t limit = std::min<uint64_t>(ceiling, 2ull * n);
  if (memory->unprofitable > 0) limit = std::min(limit, memory->unprofitable - 1);
  const double aim = 1 + kGrowthMargin * (spec.max_gap - 1);
  uint32_t to = n;
  std::string projection;
  if (n == 1) {
    // No staleness at one trainer: a Gap above 1 comes from the rule itself
    // (GA+DANA measures Δ against its look-ahead point). Nothing to project
    // from, so it doubles while that Gap is under the aim.
    if (gap <= aim) to = std::max(limit, n);
  } else if (gap <= 1) {
    to = std::max(limit, n);
  } else {
    to = std::max(n, std::min(limit, LargestUnder(aim, gap, n)));
    projection =
        " (projected " + Fixed(ProjectedGap(gap, n, to), 2) + " at " + std::to_string(to) + ")";
  }
  if (to > n) {
    memory->grown_from = n;
    memory->rate_before = rate;
    return Decide(Action::kGrow, to,
                  measured + " leaves room under maxGap " + Fixed(spec.max_gap, 2) + projection +
                      " at " + Fixed(rate, 1) + " updates/s: " + Trainers(n, to));
  }
  // 6. Hold.
  std::string why;
  if (n == ceiling) {
    why = "at maxReplicas " + std::to_string(ceiling);
  } else if (memory->unprofitable > 0 && n + 1 >= memory->unprofitable) {
    why = std::to_string(memory->unprofitable) + " trainers did not add enough updates/s";
  } else {
    why = measured + (gap > spec.max_gap ? " is above maxGap " + Fixed(spec.max_gap, 2) +
                                               " at minReplicas " + std::to_string(floor)
                                         : " is near maxGap " + Fixed(spec.max_gap, 2));
  }
  return Decide(Action::kHold, n, why + ": holding at " + std::to_string(n) + " trainers");
}

}  // namespace gaptrain
