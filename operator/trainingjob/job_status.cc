#include "operator/trainingjob/job_status.h"

#include "operator/trainingjob/status_fields.h"

namespace gaptrain {
namespace trainingjob {
namespace {

using nlohmann::json;
using Json = nlohmann::ordered_json;

Json Typed(const char* type, const char* description) {
  return Json{{"description", description}, {"type", type}};
}

Json Timestamp(const char* description) {
  Json t = Typed("string", description);
  t["format"] = "date-time";
  return t;
}

Json Object(Json properties) { return Json{{"type", "object"}, {"properties", properties}}; }

// The schemas of the sections other files compute (job_status.h), without
// their descriptions, which the table's lines give.

Json ConditionsSchema() {
  Json condition_type = Typed("string", "what the condition is about");
  condition_type["enum"] = {"Created",           "Running",        "Restarting",
                            "Succeeded",         "Failed",         "Suspended",
                            "PodsUnschedulable", "ReplicaFailure", "ModelExported",
                            "DataUnavailable",   "Admitted"};
  Json condition_status = Typed("string", "whether it holds");
  condition_status["enum"] = {"True", "False", "Unknown"};
  Json condition = Object({{"type", condition_type},
                           {"status", condition_status},
                           {"reason", Typed("string", "a CamelCase word for machines")},
                           {"message", Typed("string", "a sentence for people")},
                           {"lastUpdateTime", Timestamp("when the condition was last written")},
                           {"lastTransitionTime", Timestamp("when status last changed")}});
  condition["required"] = {"type", "status"};
  return Json{{"type", "array"},
              {"items", condition},
              {"x-kubernetes-list-type", "map"},
              {"x-kubernetes-list-map-keys", {"type"}}};
}

Json DisplaySchema() {
  return Object(
      {{"epoch", Typed("string", "epochs done (to a tenth) / spec.training.epochs, e.g. 2.3/4")},
       {"accuracy", Typed("string", "the latest test accuracy, e.g. 98.45%")},
       {"target", Typed("string", "spec.training.target's metric, its latest value and its "
                                  "bound, e.g. perplexity 18.4 (<= 20)")},
       {"gap", Typed("string", "mean gap of recent pushes, e.g. 2.17")},
       {"updatesPerSecond",
        Typed("string", "master updates per second while Running, e.g. 270")}});
}

Json OutputSchema() {
  Json export_phase = Typed("string", "the export's state");
  export_phase["enum"] = {"Pending", "Running", "Succeeded", "Failed"};
  return Object(
      {{"claimName", Typed("string", "the claim the model is written to")},
       {"path", Typed("string", "the model's file in the claim (its model card: PATH.json)")},
       {"phase", export_phase},
       {"message", Typed("string", "where the model is, or why it is not there yet")},
       {"completionTime", Timestamp("when the export succeeded or failed")}});
}

Json AutoscaleSchema() {
  Json decision_reason = Typed("string", "what it decided");
  decision_reason["enum"] = {"ScaledUp", "ScaledDown", "Holding"};
  Json decided_at = Typed("integer",
                          "the metadata.generation it was decided at: a growth or shrink is "
                          "written to spec.workers.replicas while the spec is still that one");
  decided_at["format"] = "int64";
  return Object(
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
           {"observedGeneration", decided_at}}}}}});
}

Json GangSchema() {
  return Object(
      {{"waitingSince",
        Typed("string", "since when fewer than minReplicas trainers are ready (RFC 3339)")},
       {"releasedAt",
        Typed("string", "when the trainers' pods were last given back (RFC 3339)")},
       {"releases", Typed("integer", "times the trainers' pods were given back")}});
}

StatusFields<ReplicaCounts> ReplicaCountsFields() {
  using F = StatusFieldsOf<ReplicaCounts>;
  return {F::Count("active", &ReplicaCounts::active, "pods running"),
          F::Count("ready", &ReplicaCounts::ready, "pods running and ready"),
          F::Count("succeeded", &ReplicaCounts::succeeded, "pods that exited 0"),
          F::Count("failed", &ReplicaCounts::failed, "pods that failed")};
}

StatusFields<WorkersStatus> WorkersFields() {
  using F = StatusFieldsOf<WorkersStatus>;
  return {
      F::Count("active", &WorkersStatus::active, "trainers running (the scale's status.replicas)"),
      F::Count("ready", &WorkersStatus::ready, "trainers running and ready"),
      F::Count("desired", &WorkersStatus::desired, "spec.workers.replicas as last acted on"),
      F::Text("selector", &WorkersStatus::selector,
              "label selector of the trainers' pods, e.g. "
              "gaptrain.io/job-name=mnist,gaptrain.io/replica-type=trainer"),
      F::Text("summary", &WorkersStatus::summary, "ready/desired, e.g. 3/4")};
}

const StatusFields<JobProgress>& ProgressFields() {
  using F = StatusFieldsOf<JobProgress>;
  static const StatusFields<JobProgress> fields{
      F::Number("epoch", &JobProgress::epoch, "epochs done, fractional"),
      F::Integer("modelVersion", &JobProgress::model_version, "master updates applied"),
      F::Number("testAccuracy", &JobProgress::test_accuracy,
                "the evaluator's latest test accuracy"),
      F::Number("testLoss", &JobProgress::test_loss, "the evaluator's latest test loss"),
      F::Numbers("testMetrics", &JobProgress::test_metrics,
                 "the latest evaluation's other metrics by name (the user's eval_fn's, e.g. "
                 "top5_accuracy)",
                 "the metric's value"),
      F::Number("meanGap", &JobProgress::mean_gap, "mean gap of recent pushes"),
      F::Number("meanStaleness", &JobProgress::mean_staleness,
                "mean staleness of recent pushes, in updates"),
      F::Number("updatesPerSecond", &JobProgress::updates_per_second,
                "master updates per second, recently")};
  return fields;
}

const StatusFields<JobStatus>& JobStatusFields() {
  using F = StatusFieldsOf<JobStatus>;
  static const StatusFields<JobStatus> fields{
      F::Text("phase", &JobStatus::phase, "the job's state")
          .OneOf({"Pending", "Running", "Restarting", "Succeeded", "Failed", "Suspended",
                  "Queued"}),
      F::Computed("conditions", &JobStatus::conditions, "the job's history, one entry per type",
                  ConditionsSchema()),
      F::Integer("observedGeneration", &JobStatus::observed_generation,
                 "the metadata.generation this status describes")
          .Format("int64"),
      F::Time("startTime", &JobStatus::start_time,
              "when the job started running (again after a resume)"),
      F::Time("completionTime", &JobStatus::completion_time, "when it succeeded or failed"),
      F::Sections("replicaStatuses", &JobStatus::replica_statuses, ReplicaCountsFields(),
                  "pods by replica type",
                  {{"Master", "the master (every shard's pod)"},
                   {"Coordinator", "the coordinator"},
                   {"Evaluator", "the evaluator"},
                   {"Trainer", "the trainers"}}),
      F::Section("workers", &JobStatus::workers, WorkersFields(),
                 "the trainers, for the scale subresource and kubectl get"),
      F::Count("preemptions", &JobStatus::preemptions,
               "workers (trainers, the evaluator) lost to preemption (not failures)"),
      F::Count("failures", &JobStatus::failures,
               "genuine failures, counted against backoffLimit"),
      F::Count("restarts", &JobStatus::restarts, "times the job restarted from a checkpoint"),
      F::Section("progress", &JobStatus::progress, ProgressFields(),
                 "training as the coordinator reports it"),
      F::Computed("display", &JobStatus::display,
                  "progress as kubectl get prints it, for people (scripts read progress)",
                  DisplaySchema()),
      F::Computed("output", &JobStatus::output,
                  "the trained model's export to spec.output, once the job has succeeded",
                  OutputSchema()),
      F::Computed("autoscale", &JobStatus::autoscale,
                  "Gap-aware autoscaling (spec.workers.autoscale): its window, what it keeps "
                  "between decisions, its last decision",
                  AutoscaleSchema()),
      F::Computed("gang", &JobStatus::gang,
                  "spec.runPolicy.scheduleTimeoutSeconds at work: since when the job waits for "
                  "minReplicas ready trainers, when it last gave their pods back, how often",
                  GangSchema()),
      F::Text("image", &JobStatus::image,
              "the image the job's gaptrain containers start with where their template names "
              "none: the operator's when the job's first pods were made, kept through operator "
              "upgrades; the annotation gaptrain.io/image changes it")
          .EmptyIsUnset(),
      F::Flag("tls", &JobStatus::tls,
              "gRPC between the job's pods is TLS, with the certificate in Secret NAME-tls; set "
              "when its first pods are made, kept for its life")};
  return fields;
}

}  // namespace

Json JobStatusSchema() { return StatusFieldsSchema(JobStatusFields(), "written by the operator"); }

json JobProgress::ToJson() const { return WriteStatusFields(ProgressFields(), *this); }

json JobStatus::ToJson() const { return WriteStatusFields(JobStatusFields(), *this); }

JobStatus ReadJobStatus(const json& status) { return ReadStatusFields(JobStatusFields(), status); }

}  // namespace trainingjob
}  // namespace gaptrain
