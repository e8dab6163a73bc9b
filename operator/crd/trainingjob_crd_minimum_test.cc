// The CRD on the oldest Kubernetes release gaptrain supports
// (kMinimumKubernetesVersion; its kube-apiserver is the envtest assets'
// minimum/, built by scripts/test-cluster.sh): it installs, the server keeps
// what an older one would drop without a word (selectableFields, a rule's
// fieldPath and messageExpression), and they work there: a field selector
// picks jobs, a broken job is refused naming its field, every cluster
// example is accepted.

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "operator/crd/trainingjob_crd.h"
#include "operator/envtest/api_resources.h"
#include "operator/envtest/control_plane.h"
#include "operator/envtest/shared_control_plane.h"
#include "operator/kube/api_error.h"
#include "operator/kube/resource.h"
#include "operator/testing/test_job.h"
#include "services/api/training_job.h"
#include "services/testing/missing_requirement.h"
#include "services/testing/status_assertions.h"
#include "services/testing/test_files.h"
#include "services/testing/test_processes.h"

namespace gaptrain {
namespace {

using kube_testing::TestJob;
using nlohmann::json;

class TrainingJobCrdMinimumTest
    : public envtest::SharedControlPlaneTest<TrainingJobCrdMinimumTest> {
 public:
  static envtest::ControlPlane::Options ControlPlaneOptions() {
    envtest::ControlPlane::Options options;
    options.work_dir = TestTempDir("minimum-cluster");
    options.minimum_supported_release = true;
    options.crd_files = {kTrainingJobCrdPath};
    return options;
  }
};

TEST_F(TrainingJobCrdMinimumTest, TheServerIsTheDocumentedMinimum) {
  std::string output;
  ASSERT_OK(cluster_->Kubectl({"version", "-o", "json"}, &output));
  // kubectl warns after the JSON of the skew between its release and the older server.
  const size_t end = output.rfind("\n}");
  ASSERT_NE(end, std::string::npos) << output;
  const json version = json::parse(output.substr(0, end + 2), nullptr, false);
  ASSERT_TRUE(version.is_object()) << output;
  const json server = version["serverVersion"];
  EXPECT_EQ(server.value("major", "") + "." + server.value("minor", ""),
            kMinimumKubernetesVersion)
      << output;
}

TEST_F(TrainingJobCrdMinimumTest, TheCrdIsStoredWithEverythingItStates) {
  json crd;
  ASSERT_OK(cluster_->admin()->Get(envtest::kCustomResourceDefinitions, "",
                                   "trainingjobs.gaptrain.io", &crd));
  const json& version = crd["spec"]["versions"][0];
  std::vector<std::string> selectable;
  for (const json& field : version.value("selectableFields", json::array())) {
    selectable.push_back(field.value("jsonPath", ""));
  }
  EXPECT_EQ(selectable, TrainingJobSelectableFields()) << version.dump(2);
  const json& workers =
      version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["workers"];
  bool field_path = false;
  for (const json& rule : workers.value("x-kubernetes-validations", json::array())) {
    field_path |= rule.value("fieldPath", "") == ".minReplicas";
  }
  EXPECT_TRUE(field_path) << workers.dump(2);
  const json& name = version["schema"]["openAPIV3Schema"]["properties"]["metadata"]
                            ["properties"]["name"]["x-kubernetes-validations"][0];
  EXPECT_NE(name.value("messageExpression", ""), "") << name.dump(2);
}

TEST_F(TrainingJobCrdMinimumTest, SelectorsRulesAndExamplesWork) {
  kube::Client* admin = cluster_->admin();
  ASSERT_OK(admin->Create(kube::kTrainingJobs, ns_,
                          TestJob("lockstep", "{data: {path: /data}, training: {epochs: 1, mode: sync}}"),
                          nullptr));
  ASSERT_OK(admin->Create(kube::kTrainingJobs, ns_,
                          TestJob("async", "{data: {path: /data}, training: {epochs: 1}}"), nullptr));
  std::string output;
  ASSERT_OK(cluster_->Kubectl({"get", "tj", "-n", ns_, "--field-selector",
                               "spec.training.mode=sync", "-o", "name"},
                              &output));
  EXPECT_EQ(output, "trainingjob.gaptrain.io/lockstep\n");

  kube::ApiError error;
  const Status refused =
      admin->Create(kube::kTrainingJobs, ns_,
                    TestJob("min-above", "{data: {path: /data}, training: {epochs: 1}, "
                                     "workers: {replicas: 2, minReplicas: 5}}"),
                    nullptr, &error);
  EXPECT_TRUE(kube::IsInvalid(refused)) << refused.ToString();
  EXPECT_NE(error.message.find("spec.workers.minReplicas: Invalid value"), std::string::npos)
      << error.message;
  EXPECT_NE(error.message.find(kRuleMinReplicas.Text()), std::string::npos) << error.message;
  const Status named = admin->Create(kube::kTrainingJobs, ns_,
                                     TestJob("1mnist", "{data: {path: /data}, training: {epochs: 1}}"),
                                     nullptr, &error);
  EXPECT_TRUE(kube::IsInvalid(named)) << named.ToString();
  EXPECT_NE(error.message.find(", got '1mnist'"), std::string::npos) << error.message;

  int examples = 0;
  for (const std::string& file : FilesEndingIn("examples/k8s", ".yaml")) {
    if (ReadRaw(file).find("kind: TrainingJob") == std::string::npos) continue;
    ++examples;
    EXPECT_OK(cluster_->Kubectl({"apply", "-n", ns_, "--dry-run=server", "-f", file}));
  }
  EXPECT_GE(examples, 3);
}

}  // namespace
}  // namespace gaptrain
