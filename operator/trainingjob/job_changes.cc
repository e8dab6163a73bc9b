#include "operator/trainingjob/job_changes.h"

#include "operator/trainingjob/desired_children.h"
#include "operator/trainingjob/pod_ledger.h"

namespace gaptrain {
namespace trainingjob {
namespace {

// The job without what the operator and the server write.
nlohmann::json WithoutOwnWrites(nlohmann::json job) {
  job.erase("status");
  auto metadata = job.find("metadata");
  if (metadata == job.end() || !metadata->is_object()) return job;
  metadata->erase("resourceVersion");
  metadata->erase("managedFields");
  auto annotations = metadata->find("annotations");
  if (annotations != metadata->end() && annotations->is_object()) {
    annotations->erase(kPodLedgerAnnotation);
    annotations->erase(kStatusTokenAnnotation);
    if (annotations->empty()) metadata->erase(annotations);
  }
  return job;
}

}  // namespace

bool JobChangedBeyondOwnWrites(const nlohmann::json& old_job, const nlohmann::json& new_job) {
  if (!old_job.is_object() || !new_job.is_object()) return true;
  return WithoutOwnWrites(old_job) != WithoutOwnWrites(new_job);
}

}  // namespace trainingjob
}  // namespace gaptrain
