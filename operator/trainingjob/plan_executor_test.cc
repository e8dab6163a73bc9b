// ExecutePlan against a scripted API server: the requests sent (methods,
// paths, queries, content types, bodies) and their order; the errors that
// are fine (gone, replaced, already there), the ones that stop the plan
// (the ledger) or are reported (a child, the status), and Events only for
// steps that succeeded.

#include "operator/trainingjob/plan_executor.h"

#include <gtest/gtest.h>

#include "operator/kube/api_error.h"
#include "operator/testing/scripted_server.h"
#include "operator/trainingjob/object_fields.h"

namespace gaptrain {
namespace trainingjob {
namespace {

using kube::ReceivedRequest;
using kube::ScriptedReply;
using nlohmann::json;

constexpr char kJobPath[] = "/apis/gaptrain.io/v1alpha1/namespaces/default/trainingjobs/mnist";

json Job() {
  return json::parse(R"j({"apiVersion": "gaptrain.io/v1alpha1", "kind": "TrainingJob",
      "metadata": {"name": "mnist", "namespace": "default", "uid": "job-uid",
                   "resourceVersion": "100"},
      "status": {"phase": "Running", "preemptions": 0, "workers": {"active": 2}}})j");
}

ScriptedReply Reply(int status, const json& body) {
  ScriptedReply r;
  r.status = status;
  r.body = body.dump();
  return r;
}

ScriptedReply Error(int status, const char* reason, const char* message) {
  return Reply(status, {{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"},
                        {"reason", reason}, {"message", message}, {"code", status}});
}

// A plan with one of everything.
ReconcilePlan FullPlan() {
  ReconcilePlan plan;
  PodLedger ledger;
  ledger.preemptions = 1;
  ledger.counted = {"pod-uid-1"};
  plan.ledger = ledger;
  plan.deletes.push_back(
      ChildDelete{kube::kPods, "mnist-trainer-1", "pod-uid-1", 0, "replacing trainer"});
  plan.applies.push_back(ChildApply{
      kube::kSecrets,
      json::parse(R"j({"apiVersion": "v1", "kind": "Secret",
                       "metadata": {"name": "mnist-token", "namespace": "default"},
                       "stringData": {"token": "ab"}})j"),
      true, true});
  plan.applies.push_back(ChildApply{
      kube::kPods,
      json::parse(R"j({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": "mnist-trainer-0", "namespace": "default"},
                       "spec": {"restartPolicy": "Never"}})j"),
      false, true});
  plan.status = json::parse(
      R"j({"phase": "Running", "preemptions": 1, "workers": {"active": 1}})j");
  plan.events = {
      {"Normal", "WorkerPreempted", "Recreate", "trainer was preempted",
       PlannedEvent::After::kLedger, ""},
      {"Normal", "SuccessfulDeletePod", "Delete", "deleted pod mnist-trainer-1",
       PlannedEvent::After::kChild, "Pod/mnist-trainer-1"},
      {"Normal", "SuccessfulCreatePod", "Create", "created pod mnist-trainer-0",
       PlannedEvent::After::kChild, "Pod/mnist-trainer-0"},
      {"Normal", "TrainingJobRunning", "Run", "running", PlannedEvent::After::kStatus, ""},
  };
  return plan;
}

class PlanExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kube::ScriptedServer::Start({}, &server_).ok());
    kube::ClusterConfig config;
    config.server = server_->url();
    config.token = "t";
    kube::ClientOptions options;
    options.request_timeout = std::chrono::milliseconds(5000);
    ASSERT_TRUE(kube::Client::New(config, options, &client_).ok());
  }

  // Answers every request with `answer(request)`, else 200 {}.
  void Answer(std::function<std::optional<ScriptedReply>(const ReceivedRequest&)> answer) {
    server_->SetHandler([answer](const ReceivedRequest& r) {
      if (std::optional<ScriptedReply> reply = answer(r)) return *reply;
      if (r.method == "PATCH" && r.path == kJobPath) {
        return Reply(200, {{"metadata", {{"resourceVersion", "101"}}}});
      }
      return Reply(r.method == "POST" ? 201 : 200, json::object());
    });
  }

  std::vector<std::string> Calls() const {
    std::vector<std::string> calls;
    for (const ReceivedRequest& r : server_->requests()) calls.push_back(r.method + " " + r.path);
    return calls;
  }

  std::vector<std::string> EventReasons() const {
    std::vector<std::string> reasons;
    for (const ReceivedRequest& r : server_->requests()) {
      if (r.path.find("/events") != std::string::npos) {
        reasons.push_back(json::parse(r.body)["reason"]);
      }
    }
    return reasons;
  }

  std::unique_ptr<kube::ScriptedServer> server_;
  std::unique_ptr<kube::Client> client_;
};

TEST_F(PlanExecutorTest, SendsEveryStepInOrder) {
  Answer([](const ReceivedRequest&) { return std::nullopt; });
  ReconcilePlan plan = FullPlan();
  plan.delete_job = true;
  ExecutionReport report;
  const Status s = ExecutePlan(client_.get(), Job(), plan, "gaptrain-operator-0", &report);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const std::string events = "POST /apis/events.k8s.io/v1/namespaces/default/events";
  EXPECT_EQ(Calls(), (std::vector<std::string>{
                         std::string("PATCH ") + kJobPath,
                         "DELETE /api/v1/namespaces/default/pods/mnist-trainer-1",
                         "POST /api/v1/namespaces/default/secrets",
                         "PATCH /api/v1/namespaces/default/pods/mnist-trainer-0",
                         std::string("PATCH ") + kJobPath + "/status", events, events, events,
                         events, std::string("DELETE ") + kJobPath}));
  EXPECT_EQ(report.writes, 6);
  EXPECT_EQ(report.events, 4);
  EXPECT_TRUE(report.ledger_written);
  EXPECT_TRUE(report.status_written);
  const std::vector<ReceivedRequest> r = server_->requests();

  // The ledger: a merge patch of the annotation, with the resourceVersion.
  EXPECT_EQ(r[0].headers.at("content-type"), "application/merge-patch+json");
  EXPECT_EQ(json::parse(r[0].body),
            json::parse(R"j({"metadata": {"resourceVersion": "100", "annotations": {
                "gaptrain.io/pod-ledger":
                "{\"counted\":[\"pod-uid-1\"],\"failures\":0,\"preemptions\":1,\"released\":[],\"restarts\":0}"}}})j"));
  // The delete: uid precondition, grace, propagation.
  const json options = json::parse(r[1].body);
  EXPECT_EQ(options["preconditions"]["uid"], "pod-uid-1");
  EXPECT_EQ(options["gracePeriodSeconds"], 0);
  EXPECT_EQ(options["propagationPolicy"], "Background");
  // The Secret is created; the pod applied.
  EXPECT_EQ(json::parse(r[2].body)["stringData"]["token"], "ab");
  EXPECT_EQ(r[3].headers.at("content-type"), "application/apply-patch+yaml");
  EXPECT_EQ(r[3].query.at("fieldManager"), "gaptrain-operator");
  EXPECT_EQ(r[3].query.at("force"), "true");
  EXPECT_EQ(json::parse(r[3].body)["spec"]["restartPolicy"], "Never");
  // The status: the merge patch from the observed status, with the
  // resourceVersion the ledger write returned.
  EXPECT_EQ(r[4].headers.at("content-type"), "application/merge-patch+json");
  EXPECT_EQ(json::parse(r[4].body),
            json::parse(R"j({"metadata": {"resourceVersion": "101"},
                             "status": {"preemptions": 1, "workers": {"active": 1}}})j"));
  // Events about the job.
  const json event = json::parse(r[5].body);
  EXPECT_EQ(event["reason"], "WorkerPreempted");
  EXPECT_EQ(event["regarding"]["uid"], "job-uid");
  EXPECT_EQ(event["regarding"]["kind"], "TrainingJob");
  EXPECT_EQ(event["reportingInstance"], "gaptrain-operator-0");
  EXPECT_EQ(event["action"], "Recreate");
  // The job itself: Foreground, only this incarnation.
  const json job_delete = json::parse(r[9].body);
  EXPECT_EQ(job_delete["propagationPolicy"], "Foreground");
  EXPECT_EQ(job_delete["preconditions"]["uid"], "job-uid");
}

TEST_F(PlanExecutorTest, ALedgerConflictStopsEverything) {
  Answer([](const ReceivedRequest& r) -> std::optional<ScriptedReply> {
    if (r.method == "PATCH" && r.path == kJobPath) {
      return Error(409, "Conflict", "the object has been modified");
    }
    return std::nullopt;
  });
  ExecutionReport report;
  const Status s = ExecutePlan(client_.get(), Job(), FullPlan(), "op", &report);
  EXPECT_TRUE(kube::IsConflict(s)) << s.ToString();
  EXPECT_NE(s.message().find("write the pod ledger of trainingjob default/mnist"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(server_->requests().size(), 1u);
  EXPECT_FALSE(report.ledger_written);
  EXPECT_FALSE(report.status_written);
}

TEST_F(PlanExecutorTest, AStatusConflictMeansReconcileAgain) {
  Answer([](const ReceivedRequest& r) -> std::optional<ScriptedReply> {
    if (r.path == std::string(kJobPath) + "/status") {
      return Error(409, "Conflict", "the object has been modified");
    }
    return std::nullopt;
  });
  ExecutionReport report;
  const Status s = ExecutePlan(client_.get(), Job(), FullPlan(), "op", &report);
  EXPECT_TRUE(kube::IsConflict(s)) << s.ToString();
  EXPECT_NE(s.message().find("write the status of trainingjob default/mnist"), std::string::npos);
  EXPECT_TRUE(report.ledger_written);
  EXPECT_FALSE(report.status_written);
  // The children were written; the events of what happened are recorded,
  // the phase change's is not.
  EXPECT_EQ(EventReasons(), (std::vector<std::string>{"WorkerPreempted", "SuccessfulDeletePod",
                                                      "SuccessfulCreatePod"}));
}

TEST_F(PlanExecutorTest, GoneReplacedOrExistingObjectsAreFine) {
  Answer([](const ReceivedRequest& r) -> std::optional<ScriptedReply> {
    if (r.method == "DELETE" && r.path.find("/pods/") != std::string::npos) {
      return Error(409, "Conflict", "Precondition failed: UID in precondition: pod-uid-1");
    }
    if (r.method == "POST" && r.path.find("/secrets") != std::string::npos) {
      return Error(409, "AlreadyExists", "secrets \"mnist-token\" already exists");
    }
    return std::nullopt;
  });
  ExecutionReport report;
  Status s = ExecutePlan(client_.get(), Job(), FullPlan(), "op", &report);
  EXPECT_TRUE(s.ok()) << s.ToString();
  // No event for a delete that did not happen.
  EXPECT_EQ(EventReasons(), (std::vector<std::string>{"WorkerPreempted", "SuccessfulCreatePod",
                                                      "TrainingJobRunning"}));

  server_ = nullptr;
  ASSERT_TRUE(kube::ScriptedServer::Start({}, &server_).ok());
  kube::ClusterConfig config;
  config.server = server_->url();
  ASSERT_TRUE(kube::Client::New(config, kube::ClientOptions(), &client_).ok());
  Answer([](const ReceivedRequest& r) -> std::optional<ScriptedReply> {
    if (r.method == "DELETE") return Error(404, "NotFound", "not found");
    return std::nullopt;
  });
  ReconcilePlan plan = FullPlan();
  plan.delete_job = true;
  s = ExecutePlan(client_.get(), Job(), plan, "op");
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST_F(PlanExecutorTest, AFailedChildIsReportedAndTheRestStillHappens) {
  Answer([](const ReceivedRequest& r) -> std::optional<ScriptedReply> {
    if (r.method == "PATCH" && r.path.find("/pods/") != std::string::npos) {
      return Error(403, "Forbidden", "exceeded quota: pods");
    }
    if (r.method == "DELETE") return Error(500, "InternalError", "etcd timeout");
    return std::nullopt;
  });
  const Status s = ExecutePlan(client_.get(), Job(), FullPlan(), "op");
  EXPECT_EQ(s.code(), Status::Code::kUnavailable);  // the first failure's: retryable
  EXPECT_TRUE(kube::IsRetryable(s));
  EXPECT_NE(s.message().find("delete pods default/mnist-trainer-1"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("(and 1 more failed)"), std::string::npos) << s.message();
  // The status was still written, and only the events of what succeeded.
  bool status_written = false;
  for (const ReceivedRequest& r : server_->requests()) {
    status_written |= r.path == std::string(kJobPath) + "/status";
  }
  EXPECT_TRUE(status_written);
  EXPECT_EQ(EventReasons(), (std::vector<std::string>{"WorkerPreempted", "TrainingJobRunning"}));
}

TEST_F(PlanExecutorTest, FailedEventsAreReportedNotReturned) {
  Answer([](const ReceivedRequest& r) -> std::optional<ScriptedReply> {
    if (r.path.find("/events") != std::string::npos) return Error(403, "Forbidden", "no");
    return std::nullopt;
  });
  ExecutionReport report;
  const Status s = ExecutePlan(client_.get(), Job(), FullPlan(), "op", &report);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(report.events, 0);
  ASSERT_EQ(report.event_errors.size(), 4u);
  EXPECT_NE(report.event_errors[0].find("WorkerPreempted"), std::string::npos);
}

TEST_F(PlanExecutorTest, AnEmptyPlanSendsNothing) {
  Answer([](const ReceivedRequest&) { return std::nullopt; });
  ReconcilePlan plan;
  plan.requeue_after = std::chrono::seconds(15);
  EXPECT_TRUE(ExecutePlan(client_.get(), Job(), plan, "op").ok());
  EXPECT_TRUE(server_->requests().empty());
}

}  // namespace
}  // namespace trainingjob
}  // namespace gaptrain
