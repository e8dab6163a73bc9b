#include "operator/job_reconciler.h"

#include <spdlog/spdlog.h>

#include <random>
#include <utility>
#include <vector>

#include "operator/controller/object_key.h"
#include "operator/job_certificate.h"
#include "operator/kube/api_error.h"
#include "operator/trainingjob/object_fields.h"
#include "operator/trainingjob/observed_job.h"
#include "operator/trainingjob/plan_executor.h"
#include "operator/trainingjob/pod_state.h"
#include "operator/trainingjob/reconcile.h"

namespace gaptrain {
namespace {

// Fresh random bytes for a job token (used only when the Secret is missing).
std::array<uint8_t, 32> RandomTokenBytes() {
  std::random_device device;  // the kernel's CSPRNG on Linux
  std::array<uint8_t, 32> bytes{};
  for (size_t i = 0; i < bytes.size(); i += 4) {
    const uint32_t word = device();
    for (size_t j = 0; j < 4; ++j) bytes[i + j] = static_cast<uint8_t>(word >> (8 * j));
  }
  return bytes;
}

// How long a job's certificate is valid: longer than any job runs, as it
// is never renewed (a job's pods trust only it).
constexpr int kJobCertificateDays = 3650;

// Whether the job runs now, so its coordinator and master are worth asking.
bool ShouldReadProgress(const trainingjob::ObservedJob& observed) {
  if (!observed.parse_status.ok() || trainingjob::IsTerminating(observed.job)) return false;
  if (observed.spec.run_policy.suspend) return false;
  const std::string phase = trainingjob::StringAt(observed.job, {"status", "phase"});
  return phase != "Succeeded" && phase != "Failed" && phase != "Queued";
}

std::vector<nlohmann::json> Children(controller::Informer* informer, const std::string& ns,
                                     const std::string& name) {
  return informer->ListByLabel(ns, trainingjob::kJobNameLabel, name);
}

}  // namespace

std::string ApiErrorReason(const Status& s) {
  if (kube::IsConflict(s)) return "Conflict";
  if (kube::IsNotFound(s)) return "NotFound";
  if (kube::IsAlreadyExists(s)) return "AlreadyExists";
  switch (s.code()) {
    case Status::Code::kInvalidArgument: return "Invalid";
    case Status::Code::kPermissionDenied: return "Forbidden";
    case Status::Code::kUnauthenticated: return "Unauthorized";
    case Status::Code::kDeadlineExceeded: return "Timeout";
    case Status::Code::kResourceExhausted: return "TooManyRequests";
    case Status::Code::kUnavailable: return "Unavailable";
    default: return StatusCodeName(s.code());
  }
}

JobReconciler::JobReconciler(kube::Client* client, JobCaches caches,
                             trainingjob::OperatorConfig config, ProgressReader* progress,
                             OperatorMetrics* metrics)
    : client_(client),
      caches_(caches),
      config_(std::move(config)),
      progress_(progress),
      metrics_(metrics) {}

controller::Result JobReconciler::Reconcile(const std::string& key) {
  std::string ns, name;
  Status s = controller::SplitKey(key, &ns, &name);
  if (!s.ok()) {
    spdlog::error("job={} cannot be reconciled: {}", key, s.message());
    return controller::Result::Done();  // retrying cannot make the key valid
  }
  nlohmann::json job;
  if (!caches_.jobs->Get(ns, name, &job)) {
    progress_->Forget(key);
    return controller::Result::Done();
  }

  trainingjob::ObservedJob observed = trainingjob::ObserveJob(std::move(job));
  observed.pods = Children(caches_.pods, ns, name);
  observed.services = Children(caches_.services, ns, name);
  observed.config_maps = Children(caches_.config_maps, ns, name);
  observed.persistent_volume_claims = Children(caches_.persistent_volume_claims, ns, name);
  if (caches_.network_policies != nullptr) {
    observed.network_policies = Children(caches_.network_policies, ns, name);
  }
  if (caches_.workloads != nullptr) {
    observed.workloads = Children(caches_.workloads, ns, name);
  }
  if (caches_.resource_flavors != nullptr) {
    observed.resource_flavors = caches_.resource_flavors->List("");
  }
  if (caches_.priority_classes != nullptr) {
    observed.priority_classes = caches_.priority_classes->List("");
  }
  if (caches_.workload_priority_classes != nullptr) {
    observed.workload_priority_classes = caches_.workload_priority_classes->List("");
  }
  if (ShouldReadProgress(observed)) {
    std::vector<std::string> problems;
    progress_->Read(key, &observed, &problems);
    for (const std::string& p : problems) spdlog::debug("job={} progress: {}", key, p);
  }
  observed.now = std::chrono::system_clock::now();
  observed.token_bytes = RandomTokenBytes();
  observed.status_token_bytes = RandomTokenBytes();
  const std::string phase = trainingjob::StringAt(observed.job, {"status", "phase"});
  if (config_.job_tls && !trainingjob::IsTerminating(observed.job) && phase != "Succeeded" &&
      phase != "Failed") {
    // Used only where the job's pods are made with TLS and its Secret is
    // missing; an ECDSA key and a signature cost well under a millisecond.
    JobCertificate certificate;
    s = IssueJobCertificate(
        trainingjob::JobTlsNames(observed.job, trainingjob::MasterShardsOf(observed)),
        kJobCertificateDays, &certificate);
    if (s.ok()) {
      observed.tls = trainingjob::JobTls{certificate.cert_pem, certificate.key_pem};
    } else {
      spdlog::warn("job={} no TLS certificate: {}", key, s.message());
    }
  }

  const trainingjob::ReconcilePlan plan = trainingjob::PlanReconcile(observed, config_);
  const std::string old_phase = trainingjob::StringAt(observed.job, {"status", "phase"});
  if (!plan.WritesNothing()) {
    const std::string new_phase =
        plan.status ? trainingjob::StringAt(*plan.status, {"phase"}) : old_phase;
    spdlog::info("job={} plan: phase {}{}, {} deletes, {} applies{}{}{}{}", key,
                 old_phase.empty() ? "(none)" : old_phase,
                 new_phase != old_phase ? " -> " + new_phase : "", plan.deletes.size(),
                 plan.applies.size(), plan.ledger ? ", ledger" : "", plan.status ? ", status" : "",
                 plan.scale_to ? ", scale to " + std::to_string(*plan.scale_to) + " trainers" : "",
                 plan.delete_job ? ", delete the job" : "");
  }
  trainingjob::ExecutionReport report;
  s = trainingjob::ExecutePlan(client_, observed.job, plan, config_.reporting_instance, &report);
  if (metrics_ != nullptr) metrics_->RecordTransitions(TransitionsOf(observed.job, plan, report));
  for (const trainingjob::PlannedEvent& e : plan.events) {
    spdlog::log(e.type == "Warning" ? spdlog::level::warn : spdlog::level::info,
                "job={} event {}: {}", key, e.reason, e.note);
  }
  for (const std::string& e : report.event_errors) {
    spdlog::warn("job={} event not recorded: {}", key, e);
  }
  if (!s.ok()) {
    const std::string reason = ApiErrorReason(s);
    // A conflict is the normal outcome of reconciling from a cache that has
    // not yet seen the operator's own last write: quieter.
    if (reason == "Conflict") {
      spdlog::info("job={} reconcile again ({}): {}", key, reason, s.message());
    } else {
      spdlog::warn("job={} reconcile failed ({}), retrying with backoff: {}", key, reason,
                   s.message());
    }
    return controller::Result::Error(s, reason);
  }
  if (plan.requeue_after) return controller::Result::RequeueAfter(*plan.requeue_after);
  return controller::Result::Done();
}

}  // namespace gaptrain
