#include "services/coordinator/master_training.h"

#include <algorithm>

namespace gaptrain {

void MasterTraining::Observe(double now, uint32_t shard, const ShardTotals& totals) {
  if (shard >= shards_.size()) return;
  Shard& s = shards_[shard];
  if (totals.updates < s.totals.updates) s.reports.clear();  // a new run counts from 0
  s.totals = totals;
  s.reports.emplace_back(now, totals.updates);
  // Keep one report at or before the window's start, so the rate spans it.
  while (s.reports.size() > 2 && s.reports[1].first <= now - kWindowSeconds) {
    s.reports.pop_front();
  }
}

std::optional<double> MasterTraining::mean_gap() const {
  double weighted = 0, parameters = 0;
  for (const Shard& s : shards_) {
    if (s.totals.gap_count == 0) continue;
    const double p = static_cast<double>(std::max<uint64_t>(s.totals.parameters, 1));
    weighted += p * s.totals.gap_sum / static_cast<double>(s.totals.gap_count);
    parameters += p;
  }
  if (parameters == 0) return std::nullopt;
  return weighted / parameters;
}

std::optional<double> MasterTraining::mean_staleness() const {
  double sum = 0;
  uint64_t count = 0;
  for (const Shard& s : shards_) {
    sum += s.totals.staleness_sum;
    count += s.totals.staleness_count;
  }
  if (count == 0) return std::nullopt;
  return sum / static_cast<double>(count);
}

double MasterTraining::updates_per_second() const {
  double slowest = -1;
  for (const Shard& s : shards_) {
    if (s.reports.size() < 2) return 0;
    const auto& [t0, u0] = s.reports.front();
    const auto& [t1, u1] = s.reports.back();
    if (t1 - t0 < 1) return 0;
    const double rate = static_cast<double>(u1 - u0) / (t1 - t0);
    slowest = slowest < 0 ? rate : std::min(slowest, rate);
  }
  return std::max(slowest, 0.0);
}

}  // namespace gaptrain
