#include "operator/job_pod_ids.h"

#include <chrono>

#include "operator/kube/api_error.h"
#include "operator/kube/retry_busy.h"

namespace gaptrain {

Status ChooseJobPodIds(const std::string& mode, kube::Client* client, JobPodIdsChoice* out) {
  if (mode == "image" || mode == "cluster") {
    *out = JobPodIdsChoice{mode == "image", "--pod-ids=" + mode};
    return Status::OK();
  }
  if (mode != "auto") {
    return Status::InvalidArgument("--pod-ids: must be auto, image or cluster, got '" + mode + "'");
  }
  if (client == nullptr) return Status::Internal("ChooseJobPodIds: no client for discovery");
  Status s =
      kube::RetryWhileBusy([&] { return client->GetApiGroup(kOpenShiftSecurityGroup, nullptr); },
                           std::chrono::seconds(10));
  if (s.ok()) {
    *out = JobPodIdsChoice{false, std::string("the API serves ") + kOpenShiftSecurityGroup +
                                      " (OpenShift): its SCCs assign them"};
    return Status::OK();
  }
  if (kube::IsNotFound(s)) {
    *out = JobPodIdsChoice{true, std::string("the API serves no ") + kOpenShiftSecurityGroup +
                                     ": the image's user, 65532"};
    return Status::OK();
  }
  return Status(s.code(), "--pod-ids=auto: cannot tell whether the cluster assigns pods' ids: " +
                              s.message() + "; pass --pod-ids=image or --pod-ids=cluster instead");
}

}  // namespace gaptrain
