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

using Json = nlohmann::ordered_json;

Json Typed(const char* type, const char* description) {
  return Json{{"description", description}, {"type", type}};
}

Json Counts(const char* description) {
  return Json{{"description", description},
              {"type", "object"},
              {"properties",
               {{"active", Typed("integer", "pods running")},
                {"ready", Typed("integer", "pods running and ready")},
                {"succeeded", Typed("integer", "pods that exited 0")},
                {"failed", Typed("integer", "pods that failed")}}}};
}

Json Timestamp(const char* description) {
  Json t = Typed("string", description);
  t["format"] = "date-time";
  return t;
}

}  // namespace

Json JobStatusSchema() {
  Json phase = Typed("string", "the job's state");
  phase["enum"] = {"Pending", "Running", "Restarting", "Succeeded", "Failed", "Suspended",
                   "Queued"};
  Json condition_type = Typed("string", "what the condition is about");
  condition_type["enum"] = {"Created",           "Running",        "Restarting",
                            "Succeeded",         "Failed",         "Suspended",
                            "PodsUnschedulable", "ReplicaFailure", "ModelExported",
                            "DataUnavailable",   "Admitted"};
  Json condition_status = Typed("string", "whether it holds");
  condition_status["enum"] = {"True", "False", "Unknown"};
  Json condition{
      {"type", "object"},
      {"properties",
       {{"type", condition_type},
        {"status", condition_status},
        {"reason", Typed("string", "a CamelCase word for machines")},
        {"message", Typed("string", "a sentence for people")},
        {"lastUpdateTime", Timestamp("when the condition was last written")},
        {"lastTransitionTime", Timestamp("when status last changed")}}},
      {"required", {"type", "status"}}};
  Json conditions{{"description", "the job's history, one entry per type"},
                  {"type", "array"},
                  {"items", condition},
                  {"x-kubernetes-list-type", "map"},
                  {"x-kubernetes-list-map-keys", {"type"}}};
  Json export_phase = Typed("string", "the export's state");
  export_phase["enum"] = {"Pending", "Running", "Succeeded", "Failed"};
  Json output{
      {"description", "the trained model's export to spec.output, once the job has succeeded"},
      {"type", "object"},
      {"properties",
       {{"claimName", Typed("string", "the claim the model is written to")},
        {"path", Typed("string", "the model's file in the claim (its model card: PATH.json)")},
        {"phase", export_phase},
        {"message", Typed("string", "where the model is, or why it is not there yet")},
        {"completionTime", Timestamp("when the export succeeded or failed")}}}};
  Json observed = Typed("integer", "the metadata.generation this status describes");
  observed["format"] = "int64";
  Json decision_reason = Typed("string", "what it decided");
  decision_reason["enum"] = {"ScaledUp", "ScaledDown", "Holding"};
  Json decided_at = Typed("integer",
                          "the metadata.generation it was decided at: a growth or shrink is "
                          "written to spec.workers.replicas while the spec is still that one");
  decided_at["format"] = "int64";
  Json autoscale{
      {"description",
       "Gap-aware autoscaling (spec.workers.autoscale): its window, what it keeps between "
       "decisions, its last decision"},
      {"type", "object"},
      {"properties",
       {{"window",
         {{"description",
           "where the current measurement began (the master's totals since it "
           "started, as its /metrics gave them)"},
          {"type", "object"},
          {"properties",
           {{"startTime", Timestamp("when the master was read, to the microsecond")},
            {"modelVersion", Typed("number", "the master's model version")},
            {"gapSum", Typed("number", "the sum of the pushes' mean Gaps")},
            {"gapCount", Typed("number", "the pushes that measured a Gap")},
            {"preemptions", Typed("integer", "status.preemptions")},
            {"fewestTrainers",
             Typed("integer", "the fewest trainers running at any reconcile since")}}}}},
        {"grownFrom",
         Typed("integer", "trainers before the last growth, until it is judged; 0: none")},
        {"rateBefore", Typed("number", "updates per second measured at grownFrom")},
        {"unprofitable",
         Typed("integer", "the fewest trainers a growth to did not pay for; 0: none")},
        {"lastDecision",
         {{"description", "the last decision: a growth, a shrink or a hold"},
          {"type", "object"},
          {"properties",
           {{"time", Timestamp("when it was made")},
            {"reason", decision_reason},
            {"fromReplicas", Typed("integer", "the trainers it was made at")},
            {"replicas", Typed("integer", "the trainers it chose")},
            {"message", Typed("string", "why, with the measurements")},
            {"observedGeneration", decided_at}}}}}}}};
  return Json{
      {"description", "written by the operator"},
      {"type", "object"},
      {"properties",
       {{"phase", phase},
        {"conditions", conditions},
        {"observedGeneration", observed},
        {"startTime", Timestamp("when the job started running (again after a resume)")},
        {"completionTime", Timestamp("when it succeeded or failed")},
        {"replicaStatuses",
         {{"description", "pods by replica type"},
          {"type", "object"},
          {"properties",
           {{"Master", Counts("the master")},
            {"Coordinator", Counts("the coordinator")},
            {"Evaluator", Counts("the evaluator")},
            {"Trainer", Counts("the trainers")}}}}},
        {"workers",
         {{"description", "the trainers, for the scale subresource and kubectl get"},
          {"type", "object"},
          {"properties",
           {{"active", Typed("integer", "trainers running (the scale's status.replicas)")},
            {"ready", Typed("integer", "trainers running and ready")},
            {"desired", Typed("integer", "spec.workers.replicas as last acted on")},
            {"selector",
             Typed("string", "label selector of the trainers' pods, e.g. "
                             "gaptrain.io/job-name=mnist,gaptrain.io/replica-type=trainer")},
            {"summary", Typed("string", "ready/desired, e.g. 3/4")}}}}},
        {"preemptions",
         Typed("integer", "workers (trainers, the evaluator) lost to preemption (not failures)")},
        {"failures", Typed("integer", "genuine failures, counted against backoffLimit")},
        {"restarts", Typed("integer", "times the job restarted from a checkpoint")},
        {"progress",
         {{"description", "training as the coordinator reports it"},
          {"type", "object"},
          {"properties",
           {{"epoch", Typed("number", "epochs done, fractional")},
            {"modelVersion", Typed("integer", "master updates applied")},
            {"testAccuracy", Typed("number", "the evaluator's latest test accuracy")},
            {"testLoss", Typed("number", "the evaluator's latest test loss")},
            {"testMetrics",
             {{"description", "the latest evaluation's other metrics by name (the user's "
                              "eval_fn's, e.g. top5_accuracy)"},
              {"type", "object"},
              {"additionalProperties", Typed("number", "the metric's value")}}},
            {"meanGap", Typed("number", "mean gap of recent pushes")},
            {"meanStaleness", Typed("number", "mean staleness of recent pushes, in updates")},
            {"updatesPerSecond", Typed("number", "master updates per second, recently")}}}}},
        {"display",
         {{"description", "progress as kubectl get prints it, for people (scripts read progress)"},
          {"type", "object"},
          {"properties",
           {{"epoch",
             Typed("string", "epochs done (to a tenth) / spec.training.epochs, e.g. 2.3/4")},
            {"accuracy", Typed("string", "the latest test accuracy, e.g. 98.45%")},
            {"target",
             Typed("string", "spec.training.target's metric, its latest value and its bound, "
                             "e.g. perplexity 18.4 (<= 20)")},
            {"gap", Typed("string", "mean gap of recent pushes, e.g. 2.17")},
            {"updatesPerSecond",
             Typed("string", "master updates per second while Running, e.g. 270")}}}}},
        {"output", output},
        {"autoscale", autoscale},
        {"gang",
         {{"description", "spec.runPolicy.scheduleTimeoutSeconds at work: since when the job "
                          "waits for minReplicas ready trainers, when it last gave their "
                          "pods back, how often"},
          {"type", "object"},
          {"properties",
           {{"waitingSince", Typed("string", "since when fewer than minReplicas trainers are "
                                             "ready (RFC 3339)")},
            {"releasedAt", Typed("string", "when the trainers' pods were last given back (RFC "
                                           "3339)")},
            {"releases", Typed("integer", "times the trainers' pods were given back")}}}}},
        {"image",
         Typed("string",
               "the image the job's gaptrain containers start with where their template names "
               "none: the operator's when the job's first pods were made, kept through operator "
               "upgrades; the annotation gaptrain.io/image changes it")},
        {"tls", Typed("boolean",
                      "gRPC between the job's pods is TLS, with the certificate in Secret "
                      "NAME-tls; set when its first pods are made, kept for its life")}}}};
}

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
