// Tests ControlPlane against itself: the real API server enforces RBAC
// (the admin may do anything, a ServiceAccount only what is bound to it),
// the audit log records who did what with which answer, kubectl works with
// the admin kubeconfig, the controller manager collects garbage and the
// scheduler binds a pod to a Node, and Stop() leaves no process and no
// etcd data behind.

#include "operator/envtest/control_plane.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "operator/envtest/api_resources.h"
#include "operator/envtest/envtest_assets.h"
#include "services/testing/missing_requirement.h"
#include "services/testing/test_files.h"
#include "services/testing/test_processes.h"

namespace gaptrain {
namespace envtest {
namespace {

using nlohmann::json;
using std::chrono::seconds;

json ConfigMap(const std::string& name, const json& owner = json()) {
  json object = {{"apiVersion", "v1"},
                 {"kind", "ConfigMap"},
                 {"metadata", {{"name", name}}},
                 {"data", {{"key", "value"}}}};
  if (owner.is_object()) {
    object["metadata"]["ownerReferences"] = {{{"apiVersion", "v1"},
                                              {"kind", "ConfigMap"},
                                              {"name", owner["metadata"]["name"]},
                                              {"uid", owner["metadata"]["uid"]}}};
  }
  return object;
}

class ControlPlaneTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ControlPlane::Options options;
    options.work_dir = TestTempDir("control-plane");
    options.controller_manager = true;
    options.scheduler = true;
    options.audit = true;
    start_status_ = new Status(ControlPlane::Start(options, &cluster_));
  }
  static void TearDownTestSuite() {
    cluster_.reset();
    delete start_status_;
  }

  void SetUp() override {
    if (start_status_->code() == Status::Code::kNotFound) {
      GAPTRAIN_SKIP_OR_FAIL_IN_CI(start_status_->message());
    }
    ASSERT_TRUE(start_status_->ok()) << start_status_->ToString();
  }

  static std::unique_ptr<ControlPlane> cluster_;
  static Status* start_status_;
};

std::unique_ptr<ControlPlane> ControlPlaneTest::cluster_;
Status* ControlPlaneTest::start_status_;

TEST_F(ControlPlaneTest, ServiceAccountsGetExactlyWhatIsBoundToThem) {
  kube::Client* admin = cluster_->admin();
  ASSERT_TRUE(cluster_->CreateNamespace("rbac").ok());
  ASSERT_TRUE(admin
                  ->Create(kServiceAccounts, "rbac",
                           {{"metadata", {{"name", "reader"}}},
                            {"apiVersion", "v1"},
                            {"kind", "ServiceAccount"}},
                           nullptr)
                  .ok());
  ASSERT_TRUE(admin->Create(kube::kConfigMaps, "rbac", ConfigMap("settings"), nullptr).ok());
  std::string token;
  const Status got = cluster_->ServiceAccountToken("rbac", "reader", &token);
  ASSERT_TRUE(got.ok()) << got.ToString();
  std::unique_ptr<kube::Client> reader;
  ASSERT_TRUE(cluster_->NewClient(token, &reader).ok());

  json object;
  kube::ApiError error;
  Status s = reader->Get(kube::kConfigMaps, "rbac", "settings", &object, &error);
  EXPECT_EQ(error.http_status, 403) << s.ToString();
  EXPECT_NE(s.message().find("system:serviceaccount:rbac:reader"), std::string::npos)
      << s.ToString();

  ASSERT_TRUE(admin
                  ->Create(kRoles, "rbac",
                           {{"apiVersion", "rbac.authorization.k8s.io/v1"},
                            {"kind", "Role"},
                            {"metadata", {{"name", "read-configmaps"}}},
                            {"rules",
                             {{{"apiGroups", {""}},
                               {"resources", {"configmaps"}},
                               {"verbs", {"get"}}}}}},
                           nullptr)
                  .ok());
  ASSERT_TRUE(admin
                  ->Create(kRoleBindings, "rbac",
                           {{"apiVersion", "rbac.authorization.k8s.io/v1"},
                            {"kind", "RoleBinding"},
                            {"metadata", {{"name", "reader"}}},
                            {"roleRef",
                             {{"apiGroup", "rbac.authorization.k8s.io"},
                              {"kind", "Role"},
                              {"name", "read-configmaps"}}},
                            {"subjects",
                             {{{"kind", "ServiceAccount"},
                               {"name", "reader"},
                               {"namespace", "rbac"}}}}},
                           nullptr)
                  .ok());
  // RBAC's cache follows the binding within moments.
  EXPECT_TRUE(Eventually(
      [&] { return reader->Get(kube::kConfigMaps, "rbac", "settings", &object).ok(); },
      seconds(10)));
  EXPECT_EQ(object["data"]["key"], "value");
  // Still not allowed: what the Role does not grant.
  s = reader->Create(kube::kConfigMaps, "rbac", ConfigMap("mine"), nullptr, &error);
  EXPECT_EQ(error.http_status, 403) << s.ToString();

  std::vector<AuditRecord> records;
  ASSERT_TRUE(cluster_->AuditLog(&records).ok());
  auto logged = [&](const std::string& verb, const std::string& name, int code) {
    return std::any_of(records.begin(), records.end(), [&](const AuditRecord& r) {
      return r.user == "system:serviceaccount:rbac:reader" && r.verb == verb &&
             r.resource == "configmaps" && r.ns == "rbac" && r.name == name && r.code == code;
    });
  };
  EXPECT_TRUE(logged("get", "settings", 403));
  EXPECT_TRUE(logged("get", "settings", 200));
  EXPECT_TRUE(logged("create", "", 403));
}

TEST_F(ControlPlaneTest, KubectlUsesTheAdminKubeconfig) {
  const std::string manifest = TestDir("kubectl") + "/configmap.yaml";
  WriteRaw(manifest,
           "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n  namespace: default\n"
           "data:\n  answer: \"42\"\n");
  std::string output;
  Status s = cluster_->Kubectl({"apply", "--server-side", "-f", manifest}, &output);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_NE(output.find("configmap/applied serverside-applied"), std::string::npos) << output;
  json object;
  ASSERT_TRUE(cluster_->admin()->Get(kube::kConfigMaps, "default", "applied", &object).ok());
  EXPECT_EQ(object["data"]["answer"], "42");
  s = cluster_->Kubectl({"get", "configmap", "missing"}, &output);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("\"missing\" not found"), std::string::npos) << s.ToString();
}

TEST_F(ControlPlaneTest, TheControllerManagerCollectsGarbage) {
  kube::Client* admin = cluster_->admin();
  json owner;
  ASSERT_TRUE(admin->Create(kube::kConfigMaps, "default", ConfigMap("owner"), &owner).ok());
  ASSERT_TRUE(
      admin->Create(kube::kConfigMaps, "default", ConfigMap("dependent", owner), nullptr).ok());
  ASSERT_TRUE(admin->Delete(kube::kConfigMaps, "default", "owner", kube::DeleteOptions()).ok());
  EXPECT_TRUE(Eventually(
      [&] {
        json object;
        return kube::IsNotFound(admin->Get(kube::kConfigMaps, "default", "dependent", &object));
      },
      seconds(30)));
}

TEST_F(ControlPlaneTest, TheSchedulerBindsAPodToAReadyNode) {
  kube::Client* admin = cluster_->admin();
  json node = {{"apiVersion", "v1"},
               {"kind", "Node"},
               {"metadata", {{"name", "node-a"}}}};
  ASSERT_TRUE(admin->Create(kNodes, "", node, nullptr).ok());
  // As a kubelet reports itself: Ready, with room for pods. The admission
  // adds a not-ready taint to new Nodes; a kubelet's readiness lifts it
  // (the node lifecycle controller is off here), so the test removes it.
  json status = {{"status",
                  {{"conditions",
                    {{{"type", "Ready"}, {"status", "True"}, {"reason", "KubeletReady"}}}},
                   {"allocatable", {{"cpu", "4"}, {"memory", "8Gi"}, {"pods", "110"}}},
                   {"capacity", {{"cpu", "4"}, {"memory", "8Gi"}, {"pods", "110"}}}}}};
  ASSERT_TRUE(admin->MergePatch(kNodes.Subresource("status"), "", "node-a", status, nullptr).ok());
  ASSERT_TRUE(admin->MergePatch(kNodes, "", "node-a", {{"spec", {{"taints", nullptr}}}}, nullptr)
                  .ok());
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", "scheduled"}}},
              {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}};
  ASSERT_TRUE(admin->Create(kube::kPods, "default", pod, nullptr).ok());
  EXPECT_TRUE(Eventually(
      [&] {
        json object;
        return admin->Get(kube::kPods, "default", "scheduled", &object).ok() &&
               object["spec"].value("nodeName", "") == "node-a";
      },
      seconds(30)));
}

TEST_F(ControlPlaneTest, StopLeavesNoProcessAndNoDataBehind) {
  ControlPlane::Options options;
  options.work_dir = TestTempDir("second-plane");
  std::unique_ptr<ControlPlane> second;
  const Status s = ControlPlane::Start(options, &second);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_NE(second->port(), cluster_->port());
  ASSERT_TRUE(second->CreateNamespace("only-here").ok());
  second->Stop();
  EXPECT_FALSE(PathExists(options.work_dir + "/etcd"));
  EXPECT_FALSE(PathExists(options.work_dir + "/pki"));
  EXPECT_TRUE(PathExists(second->LogFile("kube-apiserver")));
  // Nothing answers on its port any more, while the first one still does.
  std::string output;
  EXPECT_FALSE(second->Kubectl({"get", "namespaces", "--request-timeout=2s"}, &output).ok());
  EXPECT_TRUE(cluster_->Kubectl({"get", "namespace", "default"}, &output).ok()) << output;
}

TEST(EnvtestAssetsTest, AMissingToolIsNamedWithHowToGetIt) {
  std::string path;
  const Status s = FindTool("kube-nothing", &path);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_NE(s.message().find("kube-nothing"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("KUBEBUILDER_ASSETS"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace envtest
}  // namespace gaptrain
