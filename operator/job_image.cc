#include "operator/job_image.h"

#include <chrono>

#include "operator/kube/api_error.h"
#include "operator/kube/resource.h"
#include "operator/kube/retry_busy.h"
#include "operator/trainingjob/object_fields.h"

namespace gaptrain {
namespace {

using nlohmann::json;
using trainingjob::ArrayAt;
using trainingjob::StringAt;

// How the error tells the user out.
constexpr char kWayOut[] = "; pass --image=IMAGE to choose the job pods' image instead";

}  // namespace

Status OperatorContainerImage(const json& pod, std::string* image, std::string* container) {
  const json& containers = ArrayAt(pod, {"spec", "containers"});
  if (containers.empty()) return Status::FailedPrecondition("it has no containers");
  const json* chosen = nullptr;
  for (const json& c : containers) {
    if (StringAt(c, {"name"}) == kOperatorContainerName) chosen = &c;
  }
  if (chosen == nullptr && containers.size() == 1) chosen = &containers[0];
  if (chosen == nullptr) {
    std::string names;
    for (const json& c : containers) names += (names.empty() ? "" : ", ") + StringAt(c, {"name"});
    return Status::FailedPrecondition("none of its " + std::to_string(containers.size()) +
                                      " containers (" + names + ") is named \"" +
                                      kOperatorContainerName + "\"");
  }
  const std::string found = StringAt(*chosen, {"image"});
  if (found.empty()) {
    return Status::FailedPrecondition("its container \"" + StringAt(*chosen, {"name"}) +
                                      "\" names no image");
  }
  *image = found;
  *container = StringAt(*chosen, {"name"});
  return Status::OK();
}

Status ChooseJobImage(const OperatorOptions& options, kube::Client* client, JobImageChoice* out) {
  if (options.image_given) {
    *out = JobImageChoice{options.job.image, "--image"};
    return Status::OK();
  }
  if (options.own_pod_name.empty()) {
    *out = JobImageChoice{options.job.image,
                          "the built-in default (not in a cluster: $POD_NAME is unset)"};
    return Status::OK();
  }
  if (client == nullptr) return Status::Internal("ChooseJobImage: no client to read the pod");
  const std::string ns =
      options.own_pod_namespace.empty() ? client->default_namespace() : options.own_pod_namespace;
  const std::string pod_name = ns + "/" + options.own_pod_name;
  const std::string what =
      "job pods' image: --image is not given, so they get the image of "
      "this operator's own container, but its pod " +
      pod_name + " ($POD_NAMESPACE/$POD_NAME)";
  json pod;
  // A busy or restarting API server is waited for a little; a refusal or
  // a missing pod is final.
  Status s = kube::RetryWhileBusy(
      [&] { return client->Get(kube::kPods, ns, options.own_pod_name, &pod); },
      std::chrono::seconds(10));
  if (!s.ok()) {
    std::string hint;
    if (s.code() == Status::Code::kPermissionDenied) {
      hint =
          " (the operator's ClusterRole must grant get on pods, as "
          "deploy/rbac/cluster_role.yaml does)";
    }
    return Status(s.code(), what + " cannot be read: " + s.message() + hint + kWayOut);
  }
  std::string image, container;
  s = OperatorContainerImage(pod, &image, &container);
  if (!s.ok()) return Status(s.code(), what + " has no image to give: " + s.message() + kWayOut);
  *out = JobImageChoice{image, "container \"" + container + "\" of pod " + pod_name};
  return Status::OK();
}

}  // namespace gaptrain
