#include "operator/trainingjob/plan_executor.h"

#include <optional>
#include <set>

#include "operator/kube/api_error.h"
#include "operator/kube/event.h"
#include "operator/trainingjob/job_conditions.h"
#include "operator/trainingjob/json_diff.h"
#include "operator/trainingjob/object_fields.h"

namespace gaptrain {
namespace trainingjob {
namespace {

using nlohmann::json;

// A child write the API server refused: retrying the same object cannot
// succeed until someone changes the job, the namespace or its policies.
struct Refusal {
  std::string reason;   // FailedCreate | FailedUpdate | FailedDelete
  std::string action;   // Create | Update | Delete
  std::string message;  // the API's own
};

bool IsRefusal(const kube::ApiError& error) {
  return error.http_status == 400 || error.http_status == 403 || error.http_status == 422;
}

class Executor {
 public:
  Executor(kube::Client* client, const json& job, const std::string& reporting_instance,
           ExecutionReport* report)
      : client_(client),
        job_(job),
        ns_(NamespaceOf(job)),
        name_(NameOf(job)),
        resource_version_(StringAt(job, {"metadata", "resourceVersion"})),
        reporting_instance_(reporting_instance),
        report_(report) {}

  Status Run(const ReconcilePlan& plan) {
    if (plan.ledger || !plan.annotations.empty()) {
      json annotations = json::object();
      for (const auto& [key, value] : plan.annotations) annotations[key] = value;
      if (plan.ledger) annotations[kPodLedgerAnnotation] = PodLedgerText(*plan.ledger);
      const json patch = {
          {"metadata", {{"resourceVersion", resource_version_}, {"annotations", annotations}}}};
      json updated;
      Status s = client_->MergePatch(kube::kTrainingJobs, ns_, name_, patch, &updated);
      if (!s.ok()) {
        return Status(s.code(), "write the pod ledger of trainingjob " + ns_ + "/" + name_ + ": " +
                                    s.message());
      }
      ++report_->writes;
      resource_version_ = StringAt(updated, {"metadata", "resourceVersion"}, resource_version_);
      ledger_written_ = true;
      report_->ledger_written = plan.ledger.has_value();
    }

    // A phase that ends the job is stored before the deletes it causes:
    // they remove what the verdict was read from (the coordinator), so a
    // verdict not yet stored, say after a 409 Conflict, would be lost with
    // them and the next reconcile would start the job again.
    const json& observed_status = ObjectAt(job_, {"status"});
    json stored_status = observed_status;
    if (plan.status && Finished(*plan.status) && !Finished(observed_status)) {
      Status s = WriteStatus(stored_status, *plan.status);
      if (!s.ok()) return s;
      stored_status = *plan.status;
    }

    for (const ChildDelete& d : plan.deletes) {
      kube::DeleteOptions options;
      options.propagation_policy = "Background";
      options.grace_period_seconds = d.grace_period_seconds;
      options.precondition_uid = d.uid;
      kube::ApiError error;
      Status s = client_->Delete(d.resource, ns_, d.name, options, nullptr, &error);
      // Gone, or replaced by another object of that name: nothing to delete.
      if (kube::IsNotFound(s) || (kube::IsConflict(s) && !d.uid.empty())) continue;
      Record(s, error, ChildKey(d.resource, d.name), "Delete");
    }

    for (const ChildApply& a : plan.applies) {
      Status s;
      kube::ApiError error;
      if (a.create_only) {
        s = client_->Create(a.resource, ns_, a.object, nullptr, &error);
        if (kube::IsAlreadyExists(s)) continue;
      } else {
        s = client_->Apply(a.resource, ns_, a.object, nullptr, &error);
      }
      Record(s, error, ChildKey(a.resource, NameOf(a.object)), a.creates ? "Create" : "Update");
    }

    for (const ChildStatusPatch& p : plan.status_patches) {
      kube::ApiError error;
      Status s = client_->MergePatch(p.resource.Subresource("status"), ns_, p.name, p.patch,
                                     nullptr, &error);
      if (!s.ok()) {
        s = Status(s.code(), "patch the status of " + std::string(p.resource.kind) + " " + ns_ +
                                 "/" + p.name + " (" + p.why + "): " + s.message());
      }
      Record(s, error, ChildKey(p.resource, p.name), "Update");
    }

    // The plan's status (or the observed one), with ReplicaFailure as the
    // child writes went.
    json status = plan.status ? *plan.status : observed_status;
    const bool failure_news = ReportChildWrites(plan, &status);
    bool status_ok = true;
    if ((plan.status && !report_->status_written) || status != stored_status) {
      Status s = WriteStatus(stored_status, status);
      status_ok = s.ok();
      if (!s.ok()) Fail(s);
    }

    // The autoscaler's decision is in the status now: carry it out.
    if (plan.scale_to && status_ok) {
      Status s = Scale(*plan.scale_to);
      if (!s.ok()) Fail(s);
    }

    for (const PlannedEvent& e : plan.events) {
      bool happened = status_ok;
      if (e.after == PlannedEvent::After::kLedger) happened = ledger_written_;
      if (e.after == PlannedEvent::After::kChild) happened = done_.count(e.child) > 0;
      if (e.after == PlannedEvent::After::kScale) happened = report_->scaled;
      if (happened) RecordEvent(e);
    }
    // Once the condition holds it, so a failed status write brings the
    // Event again with the next try, and a written one never does.
    if (failure_news && status_ok) {
      RecordEvent(PlannedEvent{"Warning", refusal_->reason, refusal_->action,
                               ErrorVerb(refusal_->action) + ": " + refusal_->message,
                               PlannedEvent::After::kStatus, ""});
    }

    if (plan.delete_job) {
      kube::DeleteOptions options;
      options.propagation_policy = "Foreground";
      options.precondition_uid = UidOf(job_);
      Status s = client_->Delete(kube::kTrainingJobs, ns_, name_, options);
      if (!kube::IsNotFound(s)) {
        if (s.ok()) {
          ++report_->writes;
        } else {
          Fail(Status(s.code(), "delete trainingjob " + ns_ + "/" + name_ +
                                    " (ttlSecondsAfterFinished): " + s.message()));
        }
      }
    }

    if (failures_ == 0) return Status::OK();
    std::string message = first_error_.message();
    if (failures_ > 1) message += " (and " + std::to_string(failures_ - 1) + " more failed)";
    return Status(first_error_.code(), message);
  }

 private:
  void Record(const Status& s, const kube::ApiError& error, const std::string& child,
              const char* action) {
    if (s.ok()) {
      ++report_->writes;
      done_.insert(child);
      return;
    }
    Fail(s);
    ++child_failures_;
    if (!refusal_ && IsRefusal(error)) {
      refusal_ = Refusal{std::string("Failed") + action, action,
                         error.message.empty() ? s.message() : error.message};
    }
  }

  // "Error creating", as a ReplicaSet's FailedCreate Event begins.
  static std::string ErrorVerb(const std::string& action) {
    if (action == "Create") return "Error creating";
    if (action == "Delete") return "Error deleting";
    return "Error updating";
  }

  static bool Finished(const json& status) {
    const std::string phase = StringAt(status, {"phase"});
    return phase == "Succeeded" || phase == "Failed";
  }

  // A merge patch of the status subresource from `from` to `to`, carrying
  // the resourceVersion (409 Conflict when the job changed since).
  Status WriteStatus(const json& from, const json& to) {
    const json patch = {{"metadata", {{"resourceVersion", resource_version_}}},
                        {"status", MergePatch(from, to)}};
    json updated;
    Status s =
        client_->MergePatch(kube::kTrainingJobs.Subresource("status"), ns_, name_, patch, &updated);
    if (!s.ok()) {
      return Status(s.code(),
                    "write the status of trainingjob " + ns_ + "/" + name_ + ": " + s.message());
    }
    ++report_->writes;
    report_->status_written = true;
    resource_version_ = StringAt(updated, {"metadata", "resourceVersion"}, resource_version_);
    return Status::OK();
  }

  // spec.workers.replicas through the scale subresource, as `kubectl
  // scale` writes it, carrying the resourceVersion (409 Conflict when the
  // job changed since).
  Status Scale(uint32_t replicas) {
    const json patch = {{"metadata", {{"resourceVersion", resource_version_}}},
                        {"spec", {{"replicas", replicas}}}};
    json updated;
    Status s =
        client_->MergePatch(kube::kTrainingJobs.Subresource("scale"), ns_, name_, patch, &updated);
    if (!s.ok()) {
      return Status(s.code(), "scale trainingjob " + ns_ + "/" + name_ + " to " +
                                  std::to_string(replicas) + " trainers: " + s.message());
    }
    ++report_->writes;
    report_->scaled = true;
    resource_version_ = StringAt(updated, {"metadata", "resourceVersion"}, resource_version_);
    return Status::OK();
  }

  // Sets ReplicaFailure in *status from this plan's child writes; returns
  // whether it became True or changed its message (an Event to record).
  bool ReportChildWrites(const ReconcilePlan& plan, json* status) const {
    if (!refusal_ && child_failures_ > 0) return false;  // no verdict from the API
    JobConditions conditions(ArrayAt(*status, {"conditions"}), FormatTime(plan.now));
    const std::optional<Condition> old = conditions.Get("ReplicaFailure");
    bool news = false;
    if (refusal_) {
      news = !old || old->status != "True" || old->reason != refusal_->reason ||
             old->message != refusal_->message;
      conditions.Set(Condition{"ReplicaFailure", "True", refusal_->reason, refusal_->message});
    } else {
      conditions.Clear("ReplicaFailure", "ChildrenAccepted",
                       "the API server accepted every child the job needs");
    }
    const json list = conditions.ToJson();
    if (list != ArrayAt(*status, {"conditions"})) (*status)["conditions"] = list;
    return news;
  }

  void Fail(const Status& s) {
    if (failures_++ == 0) first_error_ = s;
  }

  void RecordEvent(const PlannedEvent& e) {
    kube::EventSpec spec;
    spec.regarding = job_;
    spec.type = e.type;
    spec.reason = e.reason;
    spec.action = e.action;
    spec.note = e.note;
    spec.reporting_instance = reporting_instance_;
    Status s = kube::CreateEvent(client_, spec);
    if (s.ok()) {
      ++report_->events;
    } else {
      report_->event_errors.push_back(e.reason + ": " + s.ToString());
    }
  }

  kube::Client* const client_;
  const json& job_;
  const std::string ns_;
  const std::string name_;
  std::string resource_version_;
  const std::string reporting_instance_;
  ExecutionReport* const report_;
  bool ledger_written_ = false;
  std::set<std::string> done_;
  int child_failures_ = 0;
  std::optional<Refusal> refusal_;  // the first refused child write
  int failures_ = 0;
  Status first_error_;
};

}  // namespace

Status ExecutePlan(kube::Client* client, const json& job, const ReconcilePlan& plan,
                   const std::string& reporting_instance, ExecutionReport* report) {
  ExecutionReport ignored;
  return Executor(client, job, reporting_instance, report != nullptr ? report : &ignored).Run(plan);
}

}  // namespace trainingjob
}  // namespace gaptrain
