#include "operator/trainingjob/job_status.h"

#include <cmath>

#include "operator/trainingjob/object_fields.h"

namespace gaptrain {
namespace trainingjob {
namespace {

using nlohmann::json;

std::optional<double> Finite(const json& object, const char* key) {
  const std::optional<double> v = NumberAt(object, {key});
  if (!v || !std::isfinite(*v)) return std::nullopt;
  return v;
}

int64_t Count(const json& object, FieldPath path) { return IntegerAt(object, path).value_or(0); }

void Put(json* object, const char* key, const std::optional<double>& v) {
  if (v) (*object)[key] = *v;
}

}  // namespace

json JobProgress::ToJson() const {
  json p = json::object();
  Put(&p, "epoch", epoch);
  if (model_version) p["modelVersion"] = *model_version;
  Put(&p, "testAccuracy", test_accuracy);
  Put(&p, "testLoss", test_loss);
  if (!test_metrics.empty()) p["testMetrics"] = test_metrics;
  Put(&p, "meanGap", mean_gap);
  Put(&p, "meanStaleness", mean_staleness);
  Put(&p, "updatesPerSecond", updates_per_second);
  return p;
}

JobProgress JobProgress::FromJson(const json& progress) {
  JobProgress p;
  p.epoch = Finite(progress, "epoch");
  if (const std::optional<int64_t> v = IntegerAt(progress, {"modelVersion"}); v && *v >= 0) {
    p.model_version = static_cast<uint64_t>(*v);
  }
  p.test_accuracy = Finite(progress, "testAccuracy");
  p.test_loss = Finite(progress, "testLoss");
  for (const auto& [name, value] : ObjectAt(progress, {"testMetrics"}).items()) {
    if (value.is_number() && std::isfinite(value.get<double>())) {
      p.test_metrics[name] = value.get<double>();
    }
  }
  p.mean_gap = Finite(progress, "meanGap");
  p.mean_staleness = Finite(progress, "meanStaleness");
  p.updates_per_second = Finite(progress, "updatesPerSecond");
  return p;
}

json JobStatus::ToJson() const {
  json s = json::object();
  s["phase"] = phase;
  s["conditions"] = conditions;
  if (observed_generation) s["observedGeneration"] = *observed_generation;
  if (!start_time.empty()) s["startTime"] = start_time;
  if (!completion_time.empty()) s["completionTime"] = completion_time;
  json replicas = json::object();
  for (const auto& [type, c] : replica_statuses) {
    replicas[type] = {
        {"active", c.active}, {"ready", c.ready}, {"succeeded", c.succeeded}, {"failed", c.failed}};
  }
  s["replicaStatuses"] = replicas;
  if (workers) {
    s["workers"] = {{"active", workers->active},     {"ready", workers->ready},
                    {"desired", workers->desired},   {"selector", workers->selector},
                    {"summary", workers->summary}};
  }
  s["preemptions"] = preemptions;
  s["failures"] = failures;
  s["restarts"] = restarts;
  const json p = progress.ToJson();
  if (!p.empty()) s["progress"] = p;
  if (!display.empty()) s["display"] = display;
  if (!output.empty()) s["output"] = output;
  if (!autoscale.empty()) s["autoscale"] = autoscale;
  if (!gang.empty()) s["gang"] = gang;
  if (!image.empty()) s["image"] = image;
  if (tls) s["tls"] = true;
  return s;
}

JobStatus ReadJobStatus(const json& status) {
  JobStatus s;
  s.phase = StringAt(status, {"phase"});
  s.conditions = ArrayAt(status, {"conditions"});
  s.observed_generation = IntegerAt(status, {"observedGeneration"});
  s.start_time = StringAt(status, {"startTime"});
  s.completion_time = StringAt(status, {"completionTime"});
  for (const auto& [type, counts] : ObjectAt(status, {"replicaStatuses"}).items()) {
    if (!counts.is_object()) continue;
    s.replica_statuses[type] = {Count(counts, {"active"}), Count(counts, {"ready"}),
                                Count(counts, {"succeeded"}), Count(counts, {"failed"})};
  }
  const json& workers = ObjectAt(status, {"workers"});
  if (!workers.empty()) {
    s.workers = WorkersStatus{Count(workers, {"active"}), Count(workers, {"ready"}),
                              Count(workers, {"desired"}), StringAt(workers, {"selector"}),
                              StringAt(workers, {"summary"})};
  }
  s.preemptions = Count(status, {"preemptions"});
  s.failures = Count(status, {"failures"});
  s.restarts = Count(status, {"restarts"});
  s.progress = JobProgress::FromJson(ObjectAt(status, {"progress"}));
  s.display = ObjectAt(status, {"display"});
  s.output = ObjectAt(status, {"output"});
  s.autoscale = ObjectAt(status, {"autoscale"});
  s.gang = ObjectAt(status, {"gang"});
  s.image = StringAt(status, {"image"});
  s.tls = BoolAt(status, {"tls"});
  return s;
}

}  // namespace trainingjob
}  // namespace gaptrain
