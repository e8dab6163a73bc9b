#include "operator/trainingjob/observed_job.h"

#include <cmath>

#include "operator/trainingjob/job_conditions.h"
#include "operator/trainingjob/object_fields.h"
#include "services/api/master_metric_names.h"
#include "services/net/metrics_text.h"

namespace gaptrain {
namespace trainingjob {

double CoordinatorStatus::EpochsDone() const {
  double fraction = 0;
  if (samples_in_epoch > 0) {
    fraction = std::min(1.0, static_cast<double>(samples_done_in_epoch) /
                                 static_cast<double>(samples_in_epoch));
  }
  return static_cast<double>(epoch) + fraction;
}

Status ParseCoordinatorStatus(const std::string& body, CoordinatorStatus* out) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::DataLoss("coordinator /status: not a JSON object");
  }
  CoordinatorStatus s;
  s.phase = StringAt(j, {"phase"});
  if (s.phase != "Pending" && s.phase != "Running" && s.phase != "Succeeded" &&
      s.phase != "Failed") {
    return Status::DataLoss("coordinator /status: phase: must be Pending, Running, Succeeded "
                            "or Failed, got '" + s.phase + "'");
  }
  s.reason = StringAt(j, {"reason"});
  s.message = StringAt(j, {"message"});
  auto count = [&j](FieldPath path) {
    const std::optional<int64_t> v = IntegerAt(j, path);
    return v && *v > 0 ? static_cast<uint64_t>(*v) : uint64_t{0};
  };
  s.epoch = count({"epoch"});
  s.samples_done_in_epoch = count({"samples", "doneInEpoch"});
  s.samples_in_epoch = count({"samples", "inEpoch"});
  s.master_version = count({"masterVersion"});
  s.live_trainers = count({"workers", "liveTrainers"});
  s.evaluation_version = count({"evaluation", "version"});
  if (s.finished()) {
    for (const nlohmann::json& c : ArrayAt(j, {"conditions"})) {
      if (StringAt(c, {"type"}) == s.phase && StringAt(c, {"status"}) == "True") {
        s.finished_at = ParseTime(StringAt(c, {"lastTransitionTime"}));
      }
    }
  }
  const std::optional<double> accuracy = NumberAt(j, {"evaluation", "accuracy"});
  if (accuracy && std::isfinite(*accuracy)) {
    s.test_accuracy = *accuracy;
    const std::optional<double> loss = NumberAt(j, {"evaluation", "loss"});
    if (loss && std::isfinite(*loss)) s.test_loss = *loss;
  }
  if (const nlohmann::json* away = FieldAt(j, {"dataUnavailable"});
      away != nullptr && !away->is_null()) {
    if (!away->is_object()) {
      return Status::DataLoss("coordinator /status: dataUnavailable: must be an object");
    }
    DataUnavailableStatus d;
    d.since = StringAt(*away, {"since"});
    d.message = StringAt(*away, {"message"});
    d.worker = count({"dataUnavailable", "worker"});
    d.host = StringAt(*away, {"host"});
    d.releases = count({"dataUnavailable", "releases"});
    s.data_unavailable = std::move(d);
  }
  for (const auto& [name, value] : ObjectAt(j, {"evaluation", "metrics"}).items()) {
    if (!IsMetricName(name) || !value.is_number() || !std::isfinite(value.get<double>())) {
      return Status::DataLoss("coordinator /status: evaluation.metrics." + name.substr(0, 63) +
                              ": must be a metric name with a finite number");
    }
    s.test_metrics[name] = value.get<double>();
  }
  for (const nlohmann::json& m : ArrayAt(j, {"masters"})) {
    // A total that is not a finite number >= 0 reads as 0: the reading of
    // that shard is then as of a run that has not trained yet.
    auto total = [&m](const char* key) {
      const std::optional<double> v = NumberAt(m, {key});
      return v && std::isfinite(*v) && *v >= 0 ? *v : 0.0;
    };
    MasterShardReading r;
    const std::optional<int64_t> version = IntegerAt(m, {"version"});
    r.version = version && *version > 0 ? static_cast<uint64_t>(*version) : 0;
    r.parameters = total("parameters");
    r.updates = total("updates");
    r.gap_sum = total("gapSum");
    r.gap_count = total("gapCount");
    r.staleness_sum = total("stalenessSum");
    r.staleness_count = total("stalenessCount");
    s.masters.push_back(r);
  }
  *out = std::move(s);
  return Status::OK();
}

MasterScrape ScrapeOfShards(const CoordinatorStatus& status,
                            std::chrono::system_clock::time_point at) {
  MasterScrape scrape;
  scrape.at = at;
  scrape.model_version = static_cast<double>(status.master_version);
  double parameters = 0;
  for (const MasterShardReading& m : status.masters) parameters += m.parameters;
  const double shards = static_cast<double>(status.masters.size());
  for (const MasterShardReading& m : status.masters) {
    // A shard's weight is its share of θ: every push reaches every shard,
    // so the weighted counts are one master's, and the Gap's mean is one
    // parameter's.
    const double weight = parameters > 0 ? m.parameters / parameters : 1.0 / shards;
    scrape.gap_sum += weight * m.gap_sum;
    scrape.gap_count += weight * m.gap_count;
    scrape.staleness_sum += weight * m.staleness_sum;
    scrape.staleness_count += weight * m.staleness_count;
  }
  return scrape;
}

Status ParseMasterMetrics(const std::string& text, std::chrono::system_clock::time_point at,
                          MasterScrape* out) {
  const MetricsSample m = ParseMetricsText(text);
  const double version = MetricValue(m, master_metric::kModelVersion, -1);
  if (!(version >= 0)) {
    return Status::DataLoss(std::string("master /metrics: no ") + master_metric::kModelVersion);
  }
  MasterScrape s;
  s.at = at;
  s.model_version = version;
  s.gap_sum = MetricValue(m, master_metric::HistogramSum(master_metric::kGap));
  s.gap_count = MetricValue(m, master_metric::HistogramCount(master_metric::kGap));
  s.staleness_sum = MetricValue(m, master_metric::HistogramSum(master_metric::kStaleness));
  s.staleness_count = MetricValue(m, master_metric::HistogramCount(master_metric::kStaleness));
  for (double v : {s.gap_sum, s.gap_count, s.staleness_sum, s.staleness_count}) {
    if (!std::isfinite(v) || v < 0) {
      return Status::DataLoss("master /metrics: a gap or staleness total is not a finite, "
                              "non-negative number");
    }
  }
  *out = s;
  return Status::OK();
}

namespace {

std::optional<double> Mean(double sum, double count) {
  if (!(count > 0)) return std::nullopt;
  return sum / count;
}

}  // namespace

MasterProgress ProgressBetween(const MasterScrape* previous, const MasterScrape& current) {
  MasterProgress p;
  p.model_version = static_cast<uint64_t>(current.model_version);
  const bool continued = previous != nullptr && previous->at < current.at &&
                         current.model_version >= previous->model_version &&
                         current.gap_count >= previous->gap_count &&
                         current.staleness_count >= previous->staleness_count;
  if (!continued) {
    p.mean_gap = Mean(current.gap_sum, current.gap_count);
    p.mean_staleness = Mean(current.staleness_sum, current.staleness_count);
    return p;
  }
  // Recent pushes, when there were any; else the running means.
  p.mean_gap = Mean(current.gap_sum - previous->gap_sum, current.gap_count - previous->gap_count);
  if (!p.mean_gap) p.mean_gap = Mean(current.gap_sum, current.gap_count);
  p.mean_staleness = Mean(current.staleness_sum - previous->staleness_sum,
                          current.staleness_count - previous->staleness_count);
  if (!p.mean_staleness) p.mean_staleness = Mean(current.staleness_sum, current.staleness_count);
  const double seconds = std::chrono::duration<double>(current.at - previous->at).count();
  p.updates_per_second = (current.model_version - previous->model_version) / seconds;
  return p;
}

ObservedJob ObserveJob(nlohmann::json job_object) {
  ObservedJob o;
  o.job = std::move(job_object);
  const std::string source =
      "trainingjob " + NamespaceOf(o.job) + "/" + NameOf(o.job);
  if (!o.job.is_object()) {
    o.parse_status = Status::InvalidArgument(source + ": not a JSON object");
    return o;
  }
  o.parse_status = ParseTrainingJob(
      o.job.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), source, &o.spec);
  return o;
}

uint32_t MasterShardsOf(const ObservedJob& observed) {
  return observed.parse_status.ok() ? observed.spec.master.shards : 1;
}

}  // namespace trainingjob
}  // namespace gaptrain
