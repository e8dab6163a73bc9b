// Tests one reconcile as the Controller runs it, in-process against a real
// kube-apiserver (operator/envtest) with real informers, through a
// FaultProxy that counts the requests and injects the one error: a missing
// job is done without a write; a new job gets its children and status and
// asks to be polled, its NetworkPolicy and token Secret among them, as the
// API server stores them; a second reconcile from caches that have caught
// up writes nothing; a pod recreated comes with a create of the Secret,
// which keeps its token; an API error comes back as a retryable error with
// its reason.

#include "operator/job_reconciler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <memory>

#include "operator/envtest/control_plane.h"
#include "operator/envtest/shared_control_plane.h"
#include "operator/kube/cluster_config.h"
#include "tests/cluster/test_install.h"
#include "operator/testing/fault_proxy.h"
#include "operator/trainingjob/pod_state.h"
#include "services/testing/missing_requirement.h"
#include "services/testing/status_assertions.h"
#include "services/testing/test_files.h"
#include "services/testing/test_processes.h"

namespace gaptrain {
namespace {

using kube_testing::FaultProxy;
using nlohmann::json;
using std::chrono::seconds;

// A namespace per test: each starts with nothing in it.
class JobReconcilerTest : public envtest::SharedControlPlaneTest<JobReconcilerTest> {
 public:
  static envtest::ControlPlane::Options ControlPlaneOptions() {
    envtest::ControlPlane::Options options = SharedControlPlaneTest::ControlPlaneOptions();
    options.crd_files = {kTrainingJobCrdFile};
    return options;
  }

 protected:
  void SetUpOnCluster() override {
    FaultProxy::Options proxy_options;
    proxy_options.upstream_url = cluster_->url();
    proxy_options.upstream_ca_pem = cluster_->ca_pem();
    ASSERT_TRUE(FaultProxy::Start(proxy_options, &proxy_).ok());
    kube::ClusterConfig config;
    config.server = proxy_->url();
    config.token = cluster_->admin_token();
    config.default_namespace = ns_;
    ASSERT_TRUE(kube::Client::New(config, kube::ClientOptions(), &client_).ok());

    auto informer = [&](const kube::Resource& resource, bool children) {
      controller::Informer::Options o;
      if (children) o.index_labels = {trainingjob::kJobNameLabel};
      informers_.push_back(
          std::make_unique<controller::Informer>(client_.get(), resource, ns_, o));
      return informers_.back().get();
    };
    caches_.jobs = informer(kube::kTrainingJobs, false);
    caches_.pods = informer(kube::kPods, true);
    caches_.services = informer(kube::kServices, true);
    caches_.config_maps = informer(kube::kConfigMaps, true);
    caches_.persistent_volume_claims = informer(kube::kPersistentVolumeClaims, true);
    caches_.network_policies = informer(kube::kNetworkPolicies, true);
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
    ASSERT_TRUE(Eventually([&] {
      json job;
      return caches_.jobs->Get(ns_, "mnist", &job) &&
             caches_.pods->ListByLabel(ns_, trainingjob::kJobNameLabel, "mnist").size() == 5 &&
             caches_.network_policies->Get(ns_, "mnist-ingress", nullptr) &&
             job["metadata"]["resourceVersion"] == Job()["metadata"]["resourceVersion"];
    }, seconds(10)));
  }

  json Job() {
    json job;
    EXPECT_TRUE(cluster_->admin()->Get(kube::kTrainingJobs, ns_, "mnist", &job).ok());
    return job;
  }

  // Writes that went through the proxy: the reconciler's (the informers
  // only list and watch).
  size_t Writes() {
    size_t writes = 0;
    for (const kube_testing::ProxiedRequest& r : proxy_->RequestLog()) {
      if (r.method != "GET") ++writes;
    }
    return writes;
  }

  std::unique_ptr<FaultProxy> proxy_;
  std::unique_ptr<kube::Client> client_;
  std::vector<std::unique_ptr<controller::Informer>> informers_;
  JobCaches caches_;
  trainingjob::OperatorConfig config_;
  ProgressReader progress_;
  std::unique_ptr<JobReconciler> reconciler_;
};


TEST_F(JobReconcilerTest, AMissingJobIsDoneWithoutAWrite) {
  const controller::Result r = reconciler_->Reconcile(ns_ + "/gone");
  EXPECT_TRUE(r.status.ok());
  EXPECT_FALSE(r.requeue_after.has_value());
  EXPECT_EQ(Writes(), 0u);
  EXPECT_TRUE(reconciler_->Reconcile("not/a/key").status.ok());  // logged, never retried
}

TEST_F(JobReconcilerTest, CreatesTheChildrenThenWritesNothingOnceInStep) {
  kube::Client* admin = cluster_->admin();
  Status s = admin->Create(kube::kTrainingJobs, ns_,
                           {{"apiVersion", "gaptrain.io/v1alpha1"},
                            {"kind", "TrainingJob"},
                            {"metadata", {{"name", "mnist"}}},
                            {"spec",
                             {{"model", {{"builtin", "lenet5"}}},
                              {"data", {{"path", "/data/mnist"}}},
                              {"training", {{"epochs", 1}}},
                              {"workers", {{"replicas", 2}}}}}},
                           nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(Eventually([&] { return caches_.jobs->Get(ns_, "mnist", nullptr); }));

  controller::Result r = reconciler_->Reconcile(ns_ + "/mnist");
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  // Nothing of it runs: no progress to poll; its pods' events wake it.
  EXPECT_EQ(r.requeue_after, std::nullopt);
  kube::ListOptions selected;
  selected.label_selector = "gaptrain.io/job-name=mnist";
  kube::ObjectList pods;
  ASSERT_TRUE(admin->List(kube::kPods, ns_, selected, &pods).ok());
  EXPECT_EQ(pods.items.size(), 5u);
  EXPECT_EQ(Job()["status"]["phase"], "Pending");
  // The NetworkPolicy, as the API server accepted and stored it.
  json policy;
  ASSERT_OK(admin->Get(kube::kNetworkPolicies, ns_, "mnist-ingress", &policy));
  EXPECT_EQ(policy["spec"]["podSelector"],
            json({{"matchLabels", {{"gaptrain.io/job-name", "mnist"}}}}));
  EXPECT_EQ(policy["spec"]["policyTypes"], json({"Ingress"}));
  ASSERT_EQ(policy["spec"]["ingress"].size(), 2u) << policy.dump(2);
  EXPECT_EQ(policy["metadata"]["ownerReferences"][0]["name"], "mnist");
  // The token, created with the pods.
  json secret;
  ASSERT_OK(admin->Get(kube::kSecrets, ns_, "mnist-token", &secret));
  const json token = secret["data"]["token"];
  EXPECT_TRUE(token.is_string());

  CatchUp();
  size_t writes = Writes();
  r = reconciler_->Reconcile(ns_ + "/mnist");
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(Writes(), writes) << "the stored children are as desired: nothing to write";

  // A pod gone: it is recreated after a create of the token Secret and of
  // the certificate's (in-cluster TLS), which exist (409 AlreadyExists)
  // and keep theirs.
  kube::DeleteOptions now;
  now.grace_period_seconds = 0;
  ASSERT_TRUE(admin->Delete(kube::kPods, ns_, "mnist-trainer-0", now).ok());
  ASSERT_TRUE(Eventually([&] {
    return caches_.pods->ListByLabel(ns_, trainingjob::kJobNameLabel, "mnist").size() == 4;
  }));
  writes = proxy_->RequestLog().size();
  r = reconciler_->Reconcile(ns_ + "/mnist");
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  std::vector<std::string> sent;
  const std::vector<kube_testing::ProxiedRequest> log = proxy_->RequestLog();
  for (size_t i = writes; i < log.size(); ++i) {
    if (log[i].method != "GET") sent.push_back(log[i].method + " " + log[i].path);
  }
  ASSERT_GE(sent.size(), 3u);
  EXPECT_EQ(sent[0], "POST /api/v1/namespaces/" + ns_ + "/secrets");
  EXPECT_EQ(sent[1], "POST /api/v1/namespaces/" + ns_ + "/secrets");
  EXPECT_EQ(sent[2].rfind("PATCH /api/v1/namespaces/" + ns_ + "/pods/mnist-trainer-0", 0), 0u)
      << sent[2];
  ASSERT_OK(admin->Get(kube::kSecrets, ns_, "mnist-token", &secret));
  EXPECT_EQ(secret["data"]["token"], token);
  CatchUp();

  // The API refuses the next write: a retryable error, named.
  ASSERT_TRUE(admin->Delete(kube::kPods, ns_, "mnist-trainer-1", now).ok());
  ASSERT_TRUE(Eventually([&] {
    return caches_.pods->ListByLabel(ns_, trainingjob::kJobNameLabel, "mnist").size() == 4;
  }));
  kube_testing::ProxyFault fault;
  fault.path = "/api/v1/namespaces/" + ns_ + "/pods/*";
  fault.code = 503;
  fault.count = 10;
  proxy_->InjectFault(fault);
  r = reconciler_->Reconcile(ns_ + "/mnist");
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
