#include "tests/cluster/test_install.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "deploy/manifest_checks.h"
#include "helm/helm.h"
#include "operator/envtest/envtest_assets.h"
#include "services/base/file_paths.h"

namespace gaptrain {
namespace {

// Runfiles paths (the test's working directory is the runfiles root).
constexpr char kNamespaceFile[] = "deploy/operator/namespace.yaml";
constexpr char kRbacDir[] = "deploy/rbac";
constexpr char kChartDir[] = "helm/gaptrain";

Status RemoveRbac(envtest::ControlPlane* cluster) {
  // Both sources also install the users' aggregated roles.
  for (const char* object : {"clusterrolebinding/gaptrain-operator", "clusterrole/gaptrain-operator",
                             "clusterrole/gaptrain-edit", "clusterrole/gaptrain-view"}) {
    GAPTRAIN_RETURN_IF_ERROR(cluster->Kubectl({"delete", object, "--ignore-not-found"}));
  }
  return Status::OK();
}

}  // namespace

Status InstallOperatorRbac(envtest::ControlPlane* cluster, RbacSource source) {
  GAPTRAIN_RETURN_IF_ERROR(RemoveRbac(cluster));
  GAPTRAIN_RETURN_IF_ERROR(cluster->Kubectl({"apply", "-f", kNamespaceFile}));
  const std::string work_dir = DirName(cluster->admin_kubeconfig_file());
  if (source == RbacSource::kDeploy) {
    // `kubectl apply -k deploy/rbac`, on a copy without the runfiles' links
    // (which kustomize refuses).
    std::string kubectl;
    GAPTRAIN_RETURN_IF_ERROR(envtest::FindTool("kubectl", &kubectl));
    std::string built;
    GAPTRAIN_RETURN_IF_ERROR(KustomizeBuild(kubectl, kRbacDir, &built));
    const std::string file = work_dir + "/deploy-rbac.yaml";
    std::ofstream(file) << built;
    return cluster->Kubectl({"apply", "-f", file});
  }

  Helm helm;
  GAPTRAIN_RETURN_IF_ERROR(Helm::Find(&helm));
  std::string manifests;
  GAPTRAIN_RETURN_IF_ERROR(helm.Template(kChartDir, HelmRelease{"gaptrain", kOperatorNamespace},
                                         HelmValues(), &manifests));
  std::vector<nlohmann::json> objects;
  GAPTRAIN_RETURN_IF_ERROR(ParseManifests(manifests, &objects));
  // The chart's RBAC: the operator's ServiceAccount, ClusterRole and
  // binding, and the users' aggregated ClusterRoles.
  const std::set<std::string> kinds = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding"};
  nlohmann::json list = {{"apiVersion", "v1"}, {"kind", "List"}, {"items", nlohmann::json::array()}};
  for (const nlohmann::json& object : objects) {
    if (kinds.count(object.value("kind", "")) > 0) list["items"].push_back(object);
  }
  for (const std::string& kind : kinds) {
    if (FindObject(objects, kind, "gaptrain-operator").is_null()) {
      return Status::FailedPrecondition("the chart rendered no " + kind +
                                        " gaptrain-operator:\n" + manifests);
    }
  }
  const std::string file = work_dir + "/chart-rbac.json";
  std::ofstream(file) << list.dump(2);
  return cluster->Kubectl({"apply", "--namespace", kOperatorNamespace, "-f", file});
}

Status OperatorKubeconfig(envtest::ControlPlane* cluster, std::string* kubeconfig) {
  std::string token;
  GAPTRAIN_RETURN_IF_ERROR(
      cluster->ServiceAccountToken(kOperatorNamespace, "gaptrain-operator", &token));
  *kubeconfig = cluster->Kubeconfig(token, kOperatorNamespace);
  return Status::OK();
}

Status OperatorRequests(const envtest::ControlPlane& cluster,
                        std::vector<envtest::AuditRecord>* records) {
  GAPTRAIN_RETURN_IF_ERROR(cluster.AuditLog(records));
  records->erase(std::remove_if(records->begin(), records->end(),
                                [](const envtest::AuditRecord& r) {
                                  return r.user != kOperatorUser;
                                }),
                 records->end());
  return Status::OK();
}

}  // namespace gaptrain
