// OperatorConfig: the operator-wide settings the TrainingJob reconcile
// reads (from the operator's flags or its ConfigMap). Every field has a
// usable default, so a default-constructed config reconciles jobs.

#ifndef GAPTRAIN_OPERATOR_TRAININGJOB_OPERATOR_CONFIG_H_
#define GAPTRAIN_OPERATOR_TRAININGJOB_OPERATOR_CONFIG_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "operator/trainingjob/spot_scheduling.h"

namespace gaptrain {
namespace trainingjob {

// What a job's NetworkPolicy admits the operator's pods by: their namespace
// (NetworkPolicyConfig::operator_namespace), by the label Kubernetes gives
// every namespace, and this label of theirs, which the operator's pods
// carry in deploy/ and in the chart whatever its nameOverride
// (deploy/manifest_checks.h checks both).
constexpr char kNamespaceNameLabel[] = "kubernetes.io/metadata.name";
constexpr char kOperatorPodLabel[] = "app.kubernetes.io/part-of";
constexpr char kOperatorPodLabelValue[] = "gaptrain";

// The NetworkPolicy each job gets (desired_children.h): which pods besides
// the job's own may reach its pods, and on which ports.
struct NetworkPolicyConfig {
  // Whether jobs get one (--network-policy); without, the operator neither
  // creates nor watches NetworkPolicies.
  bool enabled = true;
  // The operator's namespace ($POD_NAMESPACE): its pods there read the
  // master's /metrics and the coordinator's /status.
  std::string operator_namespace = "gaptrain-system";
  // Where Prometheus runs, whose pods may scrape every job pod's /metrics
  // (--network-policy-prometheus-namespace); "": no such rule.
  std::string prometheus_namespace;
};

struct OperatorConfig {
  // The image of a new job's pods whose template names none: --image, else
  // the operator's own container's (operator/job_image.h); this default
  // only out of a cluster. A job keeps the image its first pods got
  // (recorded_image.h), whatever this becomes later.
  std::string image = "ghcr.io/gaptrain/gaptrain:0.1.0";  // scripts/build-image.sh
  // Secrets (names, in the job's namespace) every job pod pulls its images
  // with, after those its template names (--image-pull-secrets).
  std::vector<std::string> image_pull_secrets;
  // Whether job pods name the image's user and group (runAsUser,
  // runAsGroup and fsGroup kImageUser). False where the cluster assigns
  // them: OpenShift's restricted-v2 SCC refuses ids outside the
  // namespace's range and supplies its own, fsGroup included.
  bool fixed_pod_ids = true;
  // Spot tolerations and affinity (--spot-preset gke|eks|aks|none|JSON).
  SpotScheduling spot;
  // How often a running job's progress (the coordinator's /status, the
  // master's /metrics) is read again.
  std::chrono::seconds progress_poll_interval{15};
  // terminationGracePeriodSeconds of a pod whose template sets none.
  int64_t default_grace_period_seconds = 30;
  // The liveness probe's failureThreshold: generous, because a master
  // writing a large checkpoint or a worker in a long step may answer late.
  int64_t liveness_failure_threshold = 12;
  NetworkPolicyConfig network_policy;
  // Whether jobs labelled kueue.x-k8s.io/queue-name are admitted by Kueue
  // (--kueue; kueue_workload.h). Off: the label is ignored, and Workloads
  // and ResourceFlavors are not watched (Kueue may not be installed).
  bool kueue = false;
  // Whether new jobs' gRPC is TLS, with a certificate the operator issues
  // per job (--job-tls). A job keeps what it started with (status.tls).
  bool job_tls = true;
  // Events' reportingInstance: the operator pod's name.
  std::string reporting_instance = "gaptrain-operator";
};

}  // namespace trainingjob
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TRAININGJOB_OPERATOR_CONFIG_H_
