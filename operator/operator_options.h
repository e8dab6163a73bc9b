// OperatorOptions: how gaptrain-operator is started: where the cluster is,
// which namespaces it watches, the defaults its pods get, leader election,
// and where it serves /metrics, /healthz and /readyz. Flags follow
// controller-runtime's operators (--leader-elect, --metrics-port, ...) so a
// Deployment reads as for any other operator; each accepts "--flag value"
// and "--flag=value".

#ifndef GAPTRAIN_OPERATOR_OPERATOR_OPTIONS_H_
#define GAPTRAIN_OPERATOR_OPERATOR_OPTIONS_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "operator/trainingjob/operator_config.h"
#include "services/base/status.h"

namespace gaptrain {

struct OperatorOptions {
  std::string kubeconfig;  // --kubeconfig: else $KUBECONFIG, ~/.kube/config, in-cluster
  std::string context;     // --context: else the kubeconfig's current-context
  std::string watch_namespace;  // --namespace: "" watches every namespace

  // --image, --image-pull-secrets, --spot-preset, --progress-poll-seconds,
  // --network-policy, --network-policy-prometheus-namespace (network_policy's
  // operator_namespace is $POD_NAMESPACE when set); reporting_instance is
  // the pod name. job.image is --image when given; else the built-in
  // default until OperatorProcess::Start chooses the image of the
  // operator's own container (job_image.h).
  trainingjob::OperatorConfig job;
  bool image_given = false;  // --image was given: it wins
  // --pod-ids: "image", "cluster" or "auto"; OperatorProcess::Start sets
  // job.fixed_pod_ids from it (job_pod_ids.h).
  std::string pod_ids = "auto";

  // The operator's own pod, from the downward API: $POD_NAMESPACE and
  // $POD_NAME ("" out of a cluster; --pod-name does not change them).
  // Without --image, job pods get the image of its container.
  std::string own_pod_namespace;
  std::string own_pod_name;

  int workers = 2;  // --workers: reconciles at once

  bool leader_elect = true;               // --leader-elect true|false
  std::string leader_election_namespace;  // --leader-election-namespace: else the operator's own
  std::string lease_name = "gaptrain-operator";       // --lease-name
  std::chrono::milliseconds lease_duration{15000};    // --lease-duration-seconds
  std::chrono::milliseconds renew_deadline{10000};    // --renew-deadline-seconds
  std::chrono::milliseconds retry_period{2000};       // --retry-period-seconds

  std::string metrics_address = "0.0.0.0";  // --metrics-address: /metrics and the health port
  uint16_t metrics_port = 8080;             // --metrics-port (0: ephemeral)
  uint16_t health_port = 8081;              // --health-port: /healthz, /readyz (0: ephemeral)
  std::string ports_file;                   // --ports-file: "METRICS HEALTH" once listening

  std::string pod_name;  // --pod-name: else $POD_NAME, else $HOSTNAME
};

// Parses flags (argv[0] excluded); `env` supplies POD_NAME, POD_NAMESPACE
// and HOSTNAME.
// Errors name the flag and the reason.
Status ParseOperatorFlags(const std::vector<std::string>& args,
                          const std::map<std::string, std::string>& env,
                          OperatorOptions* options);

// The flags' help text.
std::string OperatorUsage();

}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_OPERATOR_OPTIONS_H_
