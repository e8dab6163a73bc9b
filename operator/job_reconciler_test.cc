// Tests one reconcile as the Controller runs it, in-process against the
// in-test API server with real informers: a missing job is done without a
// write; a new job gets its children and status and asks to be polled; a
// second reconcile from caches that have caught up writes nothing; an API
// error comes back as a retryable error with its reason.

#include "operator/job_reconciler.h"

#include <gtest/gtest.h>

#include <memory>

#include "operator/kube/cluster_config.h"
#include "operator/kube/kubeconfig.h"
#include "operator/running_operator.h"
#include "operator/testing/fake_api_server.h"
#include "operator/trainingjob/pod_state.h"
#include "services/testing/test_files.h"
#include "services/testing/test_processes.h"

namespace gaptrain {
namespace {

using kube_testing::FakeApiServer;
using nlohmann::json;
using std::chrono::seconds;

class JobReconcilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(StartTrainingJobApiServer("", &server_).ok());
    const std::string kubeconfig = TestDir("reconciler") + "/kubeconfig";
    WriteRaw(kubeconfig, server_->Kubeconfig());
    kube::ClusterConfig config;
    ASSERT_TRUE(kube::LoadKubeconfig({kubeconfig}, "", &config).ok());
    ASSERT_TRUE(kube::Client::New(config, kube::ClientOptions(), &client_).ok());

    auto informer = [&](const kube::Resource& resource, bool children) {
      controller::Informer::Options o;
      if (children) o.index_labels = {trainingjob::kJobNameLabel};
      informers_.push_back(std::make_unique<controller::Informer>(
          client_.get(), resource, kube::kAllNamespaces, o));
      return informers_.back().get();
    };
    caches_.jobs = informer(kube::kTrainingJobs, false);
    caches_.pods = informer(kube::kPods, true);
    caches_.services = informer(kube::kServices, true);
    caches_.secrets = informer(kube::kSecrets, true);
    caches_.config_maps = informer(kube::kConfigMaps, true);
    caches_.persistent_volume_claims = informer(kube::kPersistentVolumeClaims, true);
    for (auto& i : informers_) ASSERT_TRUE(i->Start().ok());
    for (auto& i : informers_) ASSERT_TRUE(i->WaitForSync(seconds(10)));
    config_.progress_poll_interval = seconds(7);
    reconciler_ = std::make_unique<JobReconciler>(client_.get(), caches_, config_, &progress_,
                                                  nullptr);
  }

  void TearDown() override {
    for (auto& i : informers_) i->Stop();
  }

  // Waits until every informer has seen the server's latest write.
  void CatchUp() {
    const std::string rv = std::to_string(server_->resource_version());
    ASSERT_TRUE(Eventually([&] {
      json job;
      return caches_.jobs->Get("default", "mnist", &job) &&
             caches_.pods->ListByLabel("default", trainingjob::kJobNameLabel, "mnist").size() == 5 &&
             job["metadata"]["resourceVersion"] == Job()["metadata"]["resourceVersion"];
    }, seconds(10)));
  }

  json Job() {
    json job;
    EXPECT_TRUE(server_->Get("trainingjobs", "default", "mnist", &job).ok());
    return job;
  }

  std::unique_ptr<FakeApiServer> server_;
  std::unique_ptr<kube::Client> client_;
  std::vector<std::unique_ptr<controller::Informer>> informers_;
  JobCaches caches_;
  trainingjob::OperatorConfig config_;
  ProgressReader progress_;
  std::unique_ptr<JobReconciler> reconciler_;
};

TEST_F(JobReconcilerTest, AMissingJobIsDoneWithoutAWrite) {
  const controller::Result r = reconciler_->Reconcile("default/gone");
  EXPECT_TRUE(r.status.ok());
  EXPECT_FALSE(r.requeue_after.has_value());
  EXPECT_EQ(server_->CountWriteRequests(), 0u);
  EXPECT_TRUE(reconciler_->Reconcile("not/a/key").status.ok());  // logged, never retried
}

TEST_F(JobReconcilerTest, CreatesTheChildrenThenWritesNothingOnceInStep) {
  ASSERT_TRUE(server_
                  ->Create({{"apiVersion", "gaptrain.io/v1alpha1"},
                            {"kind", "TrainingJob"},
                            {"metadata", {{"name", "mnist"}, {"namespace", "default"}}},
                            {"spec",
                             {{"model", {{"builtin", "lenet5"}}},
                              {"data", {{"path", "/data/mnist"}}},
                              {"training", {{"epochs", 1}}},
                              {"workers", {{"replicas", 2}}}}}})
                  .ok());
  ASSERT_TRUE(Eventually([&] { return caches_.jobs->Get("default", "mnist", nullptr); }));

  controller::Result r = reconciler_->Reconcile("default/mnist");
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.requeue_after, std::chrono::steady_clock::duration(seconds(7)));
  std::vector<json> pods;
  ASSERT_TRUE(server_->List("pods", "default", "gaptrain.io/job-name=mnist", &pods).ok());
  EXPECT_EQ(pods.size(), 5u);
  EXPECT_EQ(Job()["status"]["phase"], "Pending");

  CatchUp();
  const size_t writes = server_->CountWriteRequests();
  r = reconciler_->Reconcile("default/mnist");
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(server_->CountWriteRequests(), writes);

  // The API refuses the next write: a retryable error, named.
  ASSERT_TRUE(server_->Delete("pods", "default", "mnist-trainer-1").ok());
  ASSERT_TRUE(Eventually([&] {
    return caches_.pods->ListByLabel("default", trainingjob::kJobNameLabel, "mnist").size() == 4;
  }));
  kube_testing::Fault fault;
  fault.path = "/api/v1/namespaces/default/pods/*";
  fault.code = 503;
  fault.count = 10;
  server_->InjectFault(fault);
  r = reconciler_->Reconcile("default/mnist");
  EXPECT_EQ(r.status.code(), Status::Code::kUnavailable) << r.status.ToString();
  EXPECT_EQ(r.error_reason, "Unavailable");
}

TEST(ApiErrorReasonTest, NamesTheApiServersAnswers) {
  using Code = Status::Code;
  EXPECT_EQ(ApiErrorReason(Status(Code::kAborted, "409 Conflict")), "Conflict");
  EXPECT_EQ(ApiErrorReason(Status(Code::kNotFound, "")), "NotFound");
  EXPECT_EQ(ApiErrorReason(Status(Code::kAlreadyExists, "")), "AlreadyExists");
  EXPECT_EQ(ApiErrorReason(Status(Code::kInvalidArgument, "")), "Invalid");
  EXPECT_EQ(ApiErrorReason(Status(Code::kPermissionDenied, "")), "Forbidden");
  EXPECT_EQ(ApiErrorReason(Status(Code::kUnauthenticated, "")), "Unauthorized");
  EXPECT_EQ(ApiErrorReason(Status(Code::kDeadlineExceeded, "")), "Timeout");
  EXPECT_EQ(ApiErrorReason(Status(Code::kResourceExhausted, "")), "TooManyRequests");
  EXPECT_EQ(ApiErrorReason(Status(Code::kUnavailable, "")), "Unavailable");
  EXPECT_EQ(ApiErrorReason(Status(Code::kDataLoss, "")), "DATA_LOSS");
}

}  // namespace
}  // namespace gaptrain
