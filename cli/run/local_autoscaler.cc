#include "cli/run/local_autoscaler.h"

#include <algorithm>
#include <cmath>

namespace gaptrain {
namespace {

// The counters a window is measured from are all there.
bool HasCounters(const AutoscaleObservation& o) {
  return o.master_reachable && o.master.model_version >= 0 && std::isfinite(o.master.gap_sum) &&
         std::isfinite(o.master.gap_count);
}

AutoscaleReading ReadingOf(const AutoscaleObservation& o) {
  return {o.seconds, o.master.model_version, o.master.gap_sum, o.master.gap_count,
          o.trainers_lost};
}

}  // namespace

LocalAutoscaler::LocalAutoscaler(const WorkersSpec& workers)
    : workers_(workers), replicas_(workers.replicas) {}

void LocalAutoscaler::BeginWindow(const AutoscaleObservation& observation) {
  window_open_ = true;
  window_start_ = observation;
  fewest_running_ = observation.running;
}

bool LocalAutoscaler::Observe(const AutoscaleObservation& o, AutoscaleDecision* decision) {
  if (!window_open_) {
    if (HasCounters(o)) BeginWindow(o);
    return false;
  }
  fewest_running_ = std::min(fewest_running_, o.running);
  if (!HasCounters(o)) return false;
  AutoscaleWindow window;
  if (!MeasureWindow(ReadingOf(window_start_), ReadingOf(o), replicas_, fewest_running_,
                     &window)) {
    BeginWindow(o);  // the master restarted
    return false;
  }
  if (window.seconds < workers_.autoscale.interval_seconds) return false;
  *decision = DecideTrainers(workers_, window, &memory_);
  if (decision->replicas != replicas_) {
    changes_.push_back(
        {o.seconds, decision->Reason(), replicas_, decision->replicas, decision->message});
  }
  replicas_ = decision->replicas;
  BeginWindow(o);
  return true;
}

std::vector<size_t> TrainerSlotsToChange(uint32_t from, uint32_t to) {
  std::vector<size_t> slots;
  for (uint32_t slot = from; slot < to; ++slot) slots.push_back(slot);
  for (uint32_t slot = from; slot > to; --slot) slots.push_back(slot - 1);
  return slots;
}

}  // namespace gaptrain
