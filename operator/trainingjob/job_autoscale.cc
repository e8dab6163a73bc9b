#include "operator/trainingjob/job_autoscale.h"

#include <algorithm>
#include <cmath>

#include "operator/kube/api_time.h"
#include "operator/trainingjob/job_conditions.h"
#include "operator/trainingjob/object_fields.h"
#include "services/autoscale/autoscale_policy.h"

namespace gaptrain {
namespace trainingjob {
namespace {

using nlohmann::json;
using Clock = std::chrono::system_clock;

bool Total(const std::optional<double>& v) { return v && std::isfinite(*v) && *v >= 0; }

double SecondsOf(Clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

// A reading at the master's read time, as a window's ends are.
AutoscaleReading ReadingAt(const MasterScrape& master, uint64_t preemptions) {
  return {SecondsOf(master.at), master.model_version, master.gap_sum, master.gap_count,
          preemptions};
}

// Where the current measurement began (status.autoscale.window).
std::optional<AutoscaleReading> ReadWindow(const json& autoscale) {
  const json& w = ObjectAt(autoscale, {"window"});
  Clock::time_point start_time;
  const bool start = kube::ParseRfc3339(StringAt(w, {"startTime"}), &start_time);
  const std::optional<double> version = NumberAt(w, {"modelVersion"});
  const std::optional<double> gap_sum = NumberAt(w, {"gapSum"});
  const std::optional<double> gap_count = NumberAt(w, {"gapCount"});
  const std::optional<int64_t> preemptions = IntegerAt(w, {"preemptions"});
  if (!start || !Total(version) || !Total(gap_sum) || !Total(gap_count) || !preemptions ||
      *preemptions < 0) {
    return std::nullopt;
  }
  return AutoscaleReading{SecondsOf(start_time), *version, *gap_sum, *gap_count,
                          static_cast<uint64_t>(*preemptions)};
}

json WindowAt(const MasterScrape& master, uint64_t preemptions, uint32_t running) {
  return {{"startTime", kube::FormatMicroTime(master.at)},
          {"modelVersion", master.model_version},
          {"gapSum", master.gap_sum},
          {"gapCount", master.gap_count},
          {"preemptions", preemptions},
          {"fewestTrainers", running}};
}

// The fewest trainers running at any reconcile of the window, this one's
// included: a window in which one was down (starting, crashed, replaced)
// did not see them all at work, as `gaptrain run` measures it. A window
// an older operator began has no record: this reconcile's count.
uint32_t FewestRunning(const json& autoscale, uint32_t running_now) {
  const std::optional<int64_t> kept = IntegerAt(autoscale, {"window", "fewestTrainers"});
  if (!kept || *kept < 0) return running_now;
  return static_cast<uint32_t>(std::min<int64_t>(*kept, running_now));
}

// A count kept in the status: a non-negative integer, else 0.
uint32_t CountAt(const json& autoscale, FieldPath path) {
  const std::optional<int64_t> v = IntegerAt(autoscale, path);
  return v && *v > 0 && *v <= UINT32_MAX ? static_cast<uint32_t>(*v) : 0;
}

AutoscaleMemory ReadMemory(const json& autoscale) {
  AutoscaleMemory memory;
  memory.grown_from = CountAt(autoscale, {"grownFrom"});
  memory.unprofitable = CountAt(autoscale, {"unprofitable"});
  const std::optional<double> rate = NumberAt(autoscale, {"rateBefore"});
  memory.rate_before = Total(rate) ? *rate : 0;
  return memory;
}

bool ChangesTrainers(const std::string& reason) {
  return reason == "ScaledUp" || reason == "ScaledDown";
}

// A growth or shrink recorded in lastDecision and not yet carried out: the
// spec is still the one it was decided at, and asks for another number.
std::optional<uint32_t> WaitingScale(const AutoscaleObservation& o, const json& last) {
  if (!ChangesTrainers(StringAt(last, {"reason"}))) return std::nullopt;
  const std::optional<int64_t> decided_at = IntegerAt(last, {"observedGeneration"});
  const std::optional<int64_t> replicas = IntegerAt(last, {"replicas"});
  if (!decided_at || *decided_at != o.generation || !replicas) return std::nullopt;
  if (*replicas < o.workers.Floor() || *replicas > o.workers.Ceiling() ||
      *replicas == o.workers.replicas) {
    return std::nullopt;
  }
  return static_cast<uint32_t>(*replicas);
}

}  // namespace

AutoscalePlan PlanAutoscale(const AutoscaleObservation& o) {
  AutoscalePlan plan;
  static const json* const kNone = new json(json::object());
  const json& old = o.status.is_object() ? o.status : *kNone;
  const json& last = ObjectAt(old, {"lastDecision"});
  const AutoscaleSpec& spec = o.workers.autoscale;
  if (!spec.enabled) {
    if (!last.empty()) plan.status = {{"lastDecision", last}};
    return plan;
  }
  plan.status = old;
  if (!o.job_running) {
    plan.status.erase("window");
    return plan;
  }
  const auto interval = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(spec.interval_seconds));

  if (const std::optional<uint32_t> waiting = WaitingScale(o, last)) {
    plan.scale_to = *waiting;
    plan.reason = StringAt(last, {"reason"});
    plan.message = StringAt(last, {"message"});
    return plan;
  }
  if (!o.master) {
    plan.next_check = interval;  // the master may answer by then
    return plan;
  }
  const MasterScrape& now = *o.master;
  const std::optional<AutoscaleReading> start = ReadWindow(old);
  AutoscaleWindow measured;
  const uint32_t fewest = FewestRunning(old, o.running_trainers);
  if (!start || !MeasureWindow(*start, ReadingAt(now, o.preemptions), o.workers.replicas,
                               fewest, &measured)) {
    plan.status["window"] = WindowAt(now, o.preemptions, o.running_trainers);
    plan.next_check = interval;
    return plan;
  }
  if (measured.seconds < spec.interval_seconds) {
    plan.status["window"]["fewestTrainers"] = fewest;
    const auto left = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(spec.interval_seconds - measured.seconds));
    plan.next_check = now.at + left - o.now;
    return plan;
  }

  AutoscaleMemory memory = ReadMemory(old);
  const AutoscaleDecision decision = DecideTrainers(o.workers, measured, &memory);

  plan.status["window"] = WindowAt(now, o.preemptions, o.running_trainers);
  plan.status["grownFrom"] = memory.grown_from;
  plan.status["rateBefore"] = memory.rate_before;
  plan.status["unprofitable"] = memory.unprofitable;
  plan.status["lastDecision"] = {
      {"time", FormatTime(o.now)},          {"reason", decision.Reason()},
      {"fromReplicas", o.workers.replicas}, {"replicas", decision.replicas},
      {"message", decision.message},        {"observedGeneration", o.generation}};
  if (decision.replicas != o.workers.replicas && ChangesTrainers(decision.Reason())) {
    plan.scale_to = decision.replicas;
    plan.reason = decision.Reason();
    plan.message = decision.message;
  }
  plan.next_check = interval;
  return plan;
}

}  // namespace trainingjob
}  // namespace gaptrain
