// Kueue's real controller manager on the test control plane: with a
// ResourceFlavor, a ClusterQueue and a LocalQueue, the ClusterQueue turns
// Active; a Job sent to the queue is suspended by Kueue's webhook as it is
// created, admitted within the quota and let run; a Job the quota can never
// hold stays suspended with its Workload waiting for quota.

#include "operator/testing/kueue_manager.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "operator/envtest/control_plane.h"
#include "operator/envtest/shared_control_plane.h"
#include "operator/kube/client.h"
#include "services/testing/missing_requirement.h"
#include "services/testing/status_assertions.h"
#include "services/testing/test_processes.h"

namespace gaptrain {
namespace kube_testing {
namespace {

using nlohmann::json;

constexpr kube::Resource kJobs{"batch", "v1", "jobs", "Job", true, ""};
constexpr char kNamespace[] = "team-a";

// Polls `condition` every 100 ms for up to 60 s.
bool Eventually(const std::function<bool()>& condition) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return true;
}

// The status of condition `type` of `object` ("" when it has none).
std::string Condition(const json& object, const std::string& type) {
  for (const json& c : object.value("status", json::object()).value("conditions", json::array())) {
    if (c.value("type", "") == type) return c.value("status", "");
  }
  return "";
}

json QueuedJob(const std::string& name, const std::string& cpu) {
  return {{"apiVersion", "batch/v1"},
          {"kind", "Job"},
          {"metadata", {{"name", name}, {"labels", {{"kueue.x-k8s.io/queue-name", "team-queue"}}}}},
          {"spec",
           {{"template",
             {{"spec",
               {{"restartPolicy", "Never"},
                {"containers",
                 {{{"name", "train"},
                   {"image", "ghcr.io/gaptrain/gaptrain:0.1.0"},
                   {"resources", {{"requests", {{"cpu", cpu}, {"memory", "1Gi"}}}}}}}}}}}}}}};
}

using envtest::ControlPlane;

class KueueManagerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ControlPlane::Options options;
    options.work_dir = TestTempDir("cluster");
    envtest::SharedControlPlane::Start(options);
    if (envtest::SharedControlPlane::Get() == nullptr) return;
    KueueManager::Options kueue_options;
    kueue_options.work_dir = TestTempDir("kueue");
    kueue_status_ = new Status(
        KueueManager::Start(envtest::SharedControlPlane::Get(), kueue_options, &kueue_));
  }
  static void TearDownTestSuite() {
    kueue_.reset();
    delete kueue_status_;
    kueue_status_ = nullptr;
    envtest::SharedControlPlane::Stop();
  }
  void SetUp() override {
    GAPTRAIN_REQUIRE_SHARED_CONTROL_PLANE();
    cluster_ = envtest::SharedControlPlane::Get();
    if (kueue_status_->code() == Status::Code::kNotFound) {
      GAPTRAIN_SKIP_OR_FAIL_IN_CI(kueue_status_->message());
    }
    ASSERT_OK(*kueue_status_);
  }

  static std::unique_ptr<KueueManager> kueue_;
  static Status* kueue_status_;
  ControlPlane* cluster_ = nullptr;
};

std::unique_ptr<KueueManager> KueueManagerTest::kueue_;
Status* KueueManagerTest::kueue_status_ = nullptr;

TEST_F(KueueManagerTest, AdmitsAQueuedJobWithinTheClusterQueuesQuota) {
  kube::Client* admin = cluster_->admin();
  ASSERT_OK(cluster_->CreateNamespace(kNamespace));
  ASSERT_OK(admin->Create(kResourceFlavors, "",
                          {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
                           {"kind", "ResourceFlavor"},
                           {"metadata", {{"name", "on-demand"}}}},
                          nullptr));
  ASSERT_OK(admin->Create(
      kClusterQueues, "",
      {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
       {"kind", "ClusterQueue"},
       {"metadata", {{"name", "research"}}},
       {"spec",
        {{"namespaceSelector", json::object()},
         {"resourceGroups",
          {{{"coveredResources", {"cpu", "memory"}},
            {"flavors",
             {{{"name", "on-demand"},
               {"resources",
                {{{"name", "cpu"}, {"nominalQuota", "4"}},
                 {{"name", "memory"}, {"nominalQuota", "16Gi"}}}}}}}}}}}}},
      nullptr));
  ASSERT_OK(admin->Create(kLocalQueues, kNamespace,
                          {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
                           {"kind", "LocalQueue"},
                           {"metadata", {{"name", "team-queue"}}},
                           {"spec", {{"clusterQueue", "research"}}}},
                          nullptr));
  json queue;
  EXPECT_TRUE(Eventually([&] {
    return admin->Get(kClusterQueues, "", "research", &queue).ok() &&
           Condition(queue, "Active") == "True";
  })) << queue.dump(2);

  // Kueue's webhook suspends the Job as it is created...
  json created;
  ASSERT_OK(admin->Create(kJobs, kNamespace, QueuedJob("fits", "1"), &created));
  EXPECT_EQ(created["spec"].value("suspend", false), true) << created.dump(2);
  // ...admits its Workload within the quota, and lets it run.
  json job, workloads;
  EXPECT_TRUE(Eventually([&] {
    return admin->Get(kJobs, kNamespace, "fits", &job).ok() &&
           !job["spec"].value("suspend", true);
  })) << job.dump(2);
  kube::ObjectList list;
  ASSERT_OK(admin->List(kWorkloads, kNamespace, kube::ListOptions(), &list));
  ASSERT_EQ(list.items.size(), 1u);
  EXPECT_EQ(Condition(list.items[0], "Admitted"), "True") << list.items[0].dump(2);
  EXPECT_EQ(list.items[0]["status"]["admission"].value("clusterQueue", ""), "research");

  // A Job larger than the whole quota waits, suspended.
  ASSERT_OK(admin->Create(kJobs, kNamespace, QueuedJob("too-big", "8"), nullptr));
  json pending;
  EXPECT_TRUE(Eventually([&] {
    if (!admin->List(kWorkloads, kNamespace, kube::ListOptions(), &list).ok()) return false;
    for (const json& w : list.items) {
      if (w["metadata"]["ownerReferences"][0].value("name", "") == "too-big") pending = w;
    }
    return Condition(pending, "QuotaReserved") == "False";
  })) << pending.dump(2);
  EXPECT_EQ(Condition(pending, "Admitted"), "") << pending.dump(2);
  ASSERT_OK(admin->Get(kJobs, kNamespace, "too-big", &job));
  EXPECT_TRUE(job["spec"].value("suspend", false)) << job.dump(2);
}

}  // namespace
}  // namespace kube_testing
}  // namespace gaptrain
