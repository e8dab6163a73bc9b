// ManifestChecks: what every rendering of gaptrain's install must satisfy,
// whether it comes from `kubectl kustomize deploy/` or from the Helm chart
// (helm/gaptrain), so both are held to the same rules:
//   - every object has apiVersion, kind and metadata.name;
//   - the ClusterRole grants exactly OperatorPolicyRules(), and is bound to
//     the ServiceAccount the operator's pods run as; no other Role or
//     ClusterRole but the users' aggregated gaptrain-edit and gaptrain-view,
//     with exactly their labels and rules;
//   - the operator's Deployment passes flags gaptrain-operator accepts
//     (its own parser) but no --image (job pods get the image of its
//     container "operator": the image is named once), elects a leader,
//     probes /healthz and /readyz on the health port, names its /metrics
//     port `metrics`, runs non-root as the image's user (no fixed
//     runAsUser or runAsGroup) with a read-only root file system and no
//     capabilities, gets its pod name and namespace from the downward
//     API, and labels its pods app.kubernetes.io/part-of: gaptrain, which
//     job NetworkPolicies admit the operator's reads by;
//   - Prometheus finds it: the example scrape configuration
//     (deploy/monitoring/prometheus-scrape.yml) keeps its metrics port and
//     nothing else, the scrape annotations name the same port, and the
//     PodMonitors select the same pods, port and labels as that
//     configuration.
// Each check returns one message per problem, empty when there is none.

#ifndef GAPTRAIN_DEPLOY_MANIFEST_CHECKS_H_
#define GAPTRAIN_DEPLOY_MANIFEST_CHECKS_H_

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "services/base/status.h"

namespace gaptrain {

using Problems = std::vector<std::string>;

// A multi-document YAML stream as objects (typed as the API server reads
// YAML); empty documents are skipped.
Status ParseManifests(const std::string& text, std::vector<nlohmann::json>* objects);

// One YAML document (a file such as prometheus-scrape.yml) as JSON.
Status ReadYamlFile(const std::string& path, nlohmann::json* out);

// The problems one to a line ("" when there are none), for test messages.
std::string ProblemLines(const Problems& problems);

// kubectl: $GAPTRAIN_KUBECTL_BINARY, else the test cluster's
// ($KUBEBUILDER_ASSETS/kubectl: the release the tests pin, with its
// kustomize), else the first `kubectl` on $PATH; "" when there is none.
std::string FindKubectl();

// `kubectl kustomize dir`'s output.
Status KustomizeBuild(const std::string& kubectl, const std::string& dir, std::string* out);

// The object of `kind` named `name`; null when there is none.
nlohmann::json FindObject(const std::vector<nlohmann::json>& objects, const std::string& kind,
                          const std::string& name);

Problems IdentityProblems(const std::vector<nlohmann::json>& objects);
Problems RbacProblems(const std::vector<nlohmann::json>& objects);
// The users' ClusterRoles gaptrain-edit (aggregated to edit and admin) and
// gaptrain-view (to view): present, with their labels and exact rules.
Problems AggregatedRoleProblems(const std::vector<nlohmann::json>& objects);
Problems OperatorDeploymentProblems(const std::vector<nlohmann::json>& objects);

// `scrape_config`: prometheus-scrape.yml as JSON.
Problems ScrapeProblems(const std::vector<nlohmann::json>& objects,
                        const nlohmann::json& scrape_config);
Problems PodMonitorProblems(const std::vector<nlohmann::json>& objects,
                            const nlohmann::json& scrape_config);

// Every check the operator's install passes, whichever renders it:
// identity, RBAC, the aggregated roles, the Deployment, scraping.
Problems InstallProblems(const std::vector<nlohmann::json>& objects,
                         const nlohmann::json& scrape_config);

// The dashboards ConfigMap: the Grafana sidecar's label, and each file of
// `dashboard_files` (paths) under its base name, byte for byte.
Problems DashboardConfigMapProblems(const std::vector<nlohmann::json>& objects,
                                    const std::vector<std::string>& dashboard_files);

}  // namespace gaptrain

#endif  // GAPTRAIN_DEPLOY_MANIFEST_CHECKS_H_
