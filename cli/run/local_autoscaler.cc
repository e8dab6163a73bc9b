#include "cli/run/local_autoscaler.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace gaptrain {
namespace {

// The counters a window is measured from are all there.
bool HasCounters(const AutoscaleObservation& o) {
  return o.master_reachable && o.master.model_version >= 0 && std::isfinite(o.master.gap_sum) &&
         std::isfinite(o.master.gap_count);
}

// A counter of the master went down: it restarted.
bool MasterRestarted(const MasterCounters& before, const MasterCounters& now) {
  return now.model_version < before.model_version || now.gap_sum < before.gap_sum ||
         now.gap_count < before.gap_count;
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
  const AutoscaleObservation& start = window_start_;
  if (MasterRestarted(start.master, o.master)) {
    BeginWindow(o);
    return false;
  }
  if (o.seconds - start.seconds < workers_.autoscale.interval_seconds) return false;

  AutoscaleWindow window;
  window.replicas = replicas_;
  window.running = fewest_running_;
  const uint64_t lost = o.trainers_lost - std::min(o.trainers_lost, start.trainers_lost);
  window.preemptions =
      static_cast<uint32_t>(std::min<uint64_t>(lost, std::numeric_limits<uint32_t>::max()));
  window.seconds = o.seconds - start.seconds;
  window.updates = o.master.model_version - start.master.model_version;
  window.gap_sum = o.master.gap_sum - start.master.gap_sum;
  window.gap_count = o.master.gap_count - start.master.gap_count;
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
