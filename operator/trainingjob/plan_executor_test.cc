// ExecutePlan against a scripted API server: the requests sent (methods,
// paths, queries, content types, bodies) and their order; the errors that
// are fine (gone, replaced, already there), the ones that stop the plan
// (the ledger) or are reported (a child, the status), and Events only for
// steps that succeeded; the autoscaler's scale after the status that
// records it, with its resourceVersion.

#include "operator/trainingjob/plan_executor.h"

#include <gtest/gtest.h>

#include <algorithm>

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
  return Reply(status, {{"kind", "Status"},
                        {"apiVersion", "v1"},
                        {"status", "Failure"},
                        {"reason", reason},
                        {"message", message},
                        {"code", status}});
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
  plan.applies.push_back(ChildApply{kube::kSecrets,
                                    json::parse(R"j({"apiVersion": "v1", "kind": "Secret",
                       "metadata": {"name": "mnist-token", "namespace": "default"},
                       "stringData": {"token": "ab"}})j"),
                                    true, true});
  plan.applies.push_back(ChildApply{kube::kPods, json::parse(R"j({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": "mnist-trainer-0", "namespace": "default"},
                       "spec": {"restartPolicy": "Never"}})j"),
                                    false, true});
  plan.status =
      json::parse(R"j({"phase": "Running", "preemptions": 1, "workers": {"active": 1}})j");
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
  void SetUp() override { StartServer(); }

  // A test that checks a second case starts again with a server that has
  // seen no request.
  void StartServer() {
    server_ = nullptr;
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
  EXPECT_EQ(Calls(),
            (std::vector<std::string>{std::string("PATCH ") + kJobPath,
                                      "DELETE /api/v1/namespaces/default/pods/mnist-trainer-1",
                                      "POST /api/v1/namespaces/default/secrets",
                                      "PATCH /api/v1/namespaces/default/pods/mnist-trainer-0",
                                      std::string("PATCH ") + kJobPath + "/status", events, events,
                                      events, events, std::string("DELETE ") + kJobPath}));
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
  EXPECT_EQ(json::parse(r[4].body), json::parse(R"j({"metadata": {"resourceVersion": "101"},
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

// The deletes of a finished job remove what the verdict was read from (the
// coordinator's pod): the phase is stored first, and a conflict there stops
// the plan before any delete, so the next reconcile still sees the verdict.
TEST_F(PlanExecutorTest, AFinishingPhaseIsStoredBeforeItsDeletes) {
  ReconcilePlan plan = FullPlan();
  plan.status = json::parse(R"j({"phase": "Succeeded", "workers": {"active": 0}})j");
  Answer([](const ReceivedRequest& r) -> std::optional<ScriptedReply> {
    if (r.path == std::string(kJobPath) + "/status") {
      return Error(409, "Conflict", "the object has been modified");
    }
    return std::nullopt;
  });
  ExecutionReport report;
  Status s = ExecutePlan(client_.get(), Job(), plan, "op", &report);
  EXPECT_TRUE(kube::IsConflict(s)) << s.ToString();
  EXPECT_EQ(Calls(), (std::vector<std::string>{std::string("PATCH ") + kJobPath,
                                               std::string("PATCH ") + kJobPath + "/status"}));
  EXPECT_FALSE(report.status_written);

  // Written: then the deletes and applies, and no second status write
  // when the children changed nothing in it.
  const size_t before = server_->requests().size();
  Answer([](const ReceivedRequest&) { return std::nullopt; });
  s = ExecutePlan(client_.get(), Job(), plan, "op", &report);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const std::vector<std::string> all = Calls();
  const std::vector<std::string> calls(all.begin() + before, all.end());
  ASSERT_GE(calls.size(), 3u);
  EXPECT_EQ(calls[1], std::string("PATCH ") + kJobPath + "/status");
  EXPECT_EQ(calls[2], "DELETE /api/v1/namespaces/default/pods/mnist-trainer-1");
  EXPECT_EQ(std::count(calls.begin(), calls.end(), std::string("PATCH ") + kJobPath + "/status"),
            1);
  EXPECT_EQ(json::parse(server_->requests()[before + 1].body)["status"]["phase"], "Succeeded");
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

  ASSERT_NO_FATAL_FAILURE(StartServer());
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
  // Only the events of what succeeded, and the refusal's Warning.
  EXPECT_EQ(EventReasons(),
            (std::vector<std::string>{"WorkerPreempted", "TrainingJobRunning", "FailedCreate"}));
}

// What kube-apiserver v1.26's PodSecurity admission answers for a pod that
// runs as root in a namespace enforcing "restricted".
constexpr char kPodSecurityMessage[] =
    "pods \"mnist-trainer-0\" is forbidden: violates PodSecurity \"restricted:latest\": "
    "allowPrivilegeEscalation != false (container \"gaptrain\" must set "
    "securityContext.allowPrivilegeEscalation=false), runAsNonRoot != true (pod or container "
    "\"gaptrain\" must set securityContext.runAsNonRoot=true)";

json ConditionIn(const json& status, const std::string& type) {
  for (const json& c : status.value("conditions", json::array())) {
    if (c.value("type", "") == type) return c;
  }
  return nullptr;
}

// The status PATCHes sent, as parsed bodies.
std::vector<json> StatusPatches(const std::vector<ReceivedRequest>& requests) {
  std::vector<json> patches;
  for (const ReceivedRequest& r : requests) {
    if (r.path == std::string(kJobPath) + "/status") patches.push_back(json::parse(r.body));
  }
  return patches;
}

// A plan that only creates trainer 0, made at 06:00:00 on 2026-11-23.
ReconcilePlan CreateTrainerPlan() {
  ReconcilePlan plan;
  plan.applies.push_back(ChildApply{kube::kPods, json::parse(R"j({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": "mnist-trainer-0", "namespace": "default"}})j"),
                                    false, true});
  plan.events.push_back({"Normal", "SuccessfulCreatePod", "Create", "created pod mnist-trainer-0",
                         PlannedEvent::After::kChild, "Pod/mnist-trainer-0"});
  plan.now = std::chrono::system_clock::from_time_t(1795413600);
  return plan;
}

// A child the API refuses (admission, PodSecurity, a quota) is a Warning
// FailedCreate with the API's message and condition ReplicaFailure, as a
// ReplicaSet reports it; the error is still returned, for the backoff.
TEST_F(PlanExecutorTest, ARefusedChildIsAFailedCreateWarningAndACondition) {
  Answer([](const ReceivedRequest& r) -> std::optional<ScriptedReply> {
    if (r.path.find("/pods/") != std::string::npos) {
      return Error(403, "Forbidden", kPodSecurityMessage);
    }
    return std::nullopt;
  });
  const Status s = ExecutePlan(client_.get(), Job(), CreateTrainerPlan(), "op");
  EXPECT_EQ(s.code(), Status::Code::kPermissionDenied) << s.ToString();
  const std::vector<ReceivedRequest> requests = server_->requests();
  const std::vector<json> patches = StatusPatches(requests);
  ASSERT_EQ(patches.size(), 1u);
  EXPECT_EQ(patches[0]["metadata"]["resourceVersion"], "100");
  const json condition = ConditionIn(patches[0]["status"], "ReplicaFailure");
  EXPECT_EQ(condition, json({{"type", "ReplicaFailure"},
                             {"status", "True"},
                             {"reason", "FailedCreate"},
                             {"message", kPodSecurityMessage},
                             {"lastTransitionTime", "2026-11-23T06:00:00Z"},
                             {"lastUpdateTime", "2026-11-23T06:00:00Z"}}))
      << patches[0].dump(2);
  // The rest of the status is left as it was.
  EXPECT_EQ(patches[0]["status"].size(), 1u) << patches[0].dump(2);
  EXPECT_EQ(EventReasons(), std::vector<std::string>{"FailedCreate"});
  const json event = json::parse(requests.back().body);
  EXPECT_EQ(event["type"], "Warning");
  EXPECT_EQ(event["action"], "Create");
  EXPECT_EQ(event["note"], std::string("Error creating: ") + kPodSecurityMessage);
  EXPECT_EQ(event["regarding"]["name"], "mnist");
}

// Retried with backoff, the same refusal writes nothing and records no
// Event again; a write that fails otherwise (5xx) says nothing either way.
TEST_F(PlanExecutorTest, TheSameRefusalAgainIsNoNews) {
  json job = Job();
  job["status"]["conditions"] = {{{"type", "ReplicaFailure"},
                                  {"status", "True"},
                                  {"reason", "FailedCreate"},
                                  {"message", kPodSecurityMessage},
                                  {"lastTransitionTime", "2026-11-23T05:00:00Z"},
                                  {"lastUpdateTime", "2026-11-23T05:00:00Z"}}};
  Answer([](const ReceivedRequest& r) -> std::optional<ScriptedReply> {
    if (r.path.find("/pods/") != std::string::npos) {
      return Error(403, "Forbidden", kPodSecurityMessage);
    }
    return std::nullopt;
  });
  EXPECT_FALSE(ExecutePlan(client_.get(), job, CreateTrainerPlan(), "op").ok());
  EXPECT_EQ(server_->requests().size(), 1u) << "only the pod's apply";

  ASSERT_NO_FATAL_FAILURE(StartServer());
  Answer([](const ReceivedRequest& r) -> std::optional<ScriptedReply> {
    if (r.path.find("/pods/") != std::string::npos) return Error(503, "ServiceUnavailable", "x");
    return std::nullopt;
  });
  EXPECT_FALSE(ExecutePlan(client_.get(), job, CreateTrainerPlan(), "op").ok());
  EXPECT_EQ(server_->requests().size(), 1u) << "no verdict: the condition stays";
}

// Once the API accepts every child write, ReplicaFailure turns False.
TEST_F(PlanExecutorTest, AcceptedChildrenClearTheFailure) {
  json job = Job();
  job["status"]["conditions"] = {{{"type", "ReplicaFailure"},
                                  {"status", "True"},
                                  {"reason", "FailedCreate"},
                                  {"message", "exceeded quota"},
                                  {"lastTransitionTime", "2026-11-23T05:00:00Z"},
                                  {"lastUpdateTime", "2026-11-23T05:00:00Z"}}};
  Answer([](const ReceivedRequest&) { return std::nullopt; });
  ASSERT_TRUE(ExecutePlan(client_.get(), job, CreateTrainerPlan(), "op").ok());
  const std::vector<json> patches = StatusPatches(server_->requests());
  ASSERT_EQ(patches.size(), 1u);
  const json condition = ConditionIn(patches[0]["status"], "ReplicaFailure");
  EXPECT_EQ(condition["status"], "False");
  EXPECT_EQ(condition["reason"], "ChildrenAccepted");
  EXPECT_EQ(condition["lastTransitionTime"], "2026-11-23T06:00:00Z");
  EXPECT_EQ(EventReasons(), std::vector<std::string>{"SuccessfulCreatePod"});

  // With no failure to clear, an accepted write touches no status.
  ASSERT_NO_FATAL_FAILURE(StartServer());
  Answer([](const ReceivedRequest&) { return std::nullopt; });
  ASSERT_TRUE(ExecutePlan(client_.get(), Job(), CreateTrainerPlan(), "op").ok());
  EXPECT_TRUE(StatusPatches(server_->requests()).empty());
}

// An update the API finds invalid (422) is FailedUpdate, merged into the
// plan's own status.
constexpr char kInvalidService[] =
    "Service \"mnist-master\" is invalid: spec.ports: Required value";

TEST_F(PlanExecutorTest, ARefusedUpdateIsFailedUpdate) {
  Answer([](const ReceivedRequest& r) -> std::optional<ScriptedReply> {
    if (r.path.find("/services/") != std::string::npos) {
      return Error(422, "Invalid", kInvalidService);
    }
    return std::nullopt;
  });
  ReconcilePlan plan;
  plan.applies.push_back(ChildApply{kube::kServices,
                                    json::parse(R"j({"apiVersion": "v1", "kind": "Service",
                       "metadata": {"name": "mnist-master", "namespace": "default"}})j"),
                                    false, false});
  plan.status = json::parse(R"j({"phase": "Running", "preemptions": 1})j");
  ExecutionReport report;
  EXPECT_TRUE(kube::IsInvalid(ExecutePlan(client_.get(), Job(), plan, "op", &report)));
  EXPECT_TRUE(report.status_written);
  const std::vector<json> patches = StatusPatches(server_->requests());
  ASSERT_EQ(patches.size(), 1u);
  EXPECT_EQ(patches[0]["status"]["preemptions"], 1);
  const json condition = ConditionIn(patches[0]["status"], "ReplicaFailure");
  EXPECT_EQ(condition["reason"], "FailedUpdate");
  EXPECT_EQ(condition["message"], kInvalidService);
  EXPECT_EQ(EventReasons(), std::vector<std::string>{"FailedUpdate"});
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

// --- Gap-aware autoscaling's scale ------------------------------------------------

// A growth: its status (the decision, the next window), then the scale.
ReconcilePlan GrowthPlan() {
  ReconcilePlan plan;
  plan.status = json::parse(R"j({"phase": "Running", "preemptions": 0, "workers": {"active": 2},
      "autoscale": {"lastDecision": {"reason": "ScaledUp", "replicas": 4}}})j");
  plan.scale_to = 4;
  plan.events = {
      {"Normal", "ScaledUp", "Scale", "Gap 1.10 leaves room: 2 -> 4 trainers",
       PlannedEvent::After::kScale, ""},
      {"Normal", "TrainingJobRunning", "Run", "running", PlannedEvent::After::kStatus, ""},
  };
  return plan;
}

const std::string kScalePath = std::string(kJobPath) + "/scale";
const std::string kStatusPath = std::string(kJobPath) + "/status";

// The status write answers resourceVersion 101, the scale 102.
std::optional<ScriptedReply> Versions(const ReceivedRequest& r) {
  if (r.method == "PATCH" && r.path == kStatusPath) {
    return Reply(200, {{"metadata", {{"resourceVersion", "101"}}}});
  }
  if (r.method == "PATCH" && r.path == kScalePath) {
    return Reply(200, {{"apiVersion", "autoscaling/v1"},
                       {"kind", "Scale"},
                       {"metadata", {{"resourceVersion", "102"}}},
                       {"spec", {{"replicas", 4}}}});
  }
  return std::nullopt;
}

// Versions, but 409 Conflict at `path`.
std::function<std::optional<ScriptedReply>(const ReceivedRequest&)> ConflictAt(
    const std::string& path) {
  return [path](const ReceivedRequest& r) -> std::optional<ScriptedReply> {
    if (r.path == path) return Error(409, "Conflict", "the object has been modified");
    return Versions(r);
  };
}

TEST_F(PlanExecutorTest, AScaleFollowsTheStatusThatRecordsIt) {
  Answer(Versions);
  ExecutionReport report;
  const Status s = ExecutePlan(client_.get(), Job(), GrowthPlan(), "op", &report);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const std::string events = "POST /apis/events.k8s.io/v1/namespaces/default/events";
  EXPECT_EQ(Calls(), (std::vector<std::string>{"PATCH " + kStatusPath, "PATCH " + kScalePath,
                                               events, events}));
  const std::vector<ReceivedRequest> r = server_->requests();
  // As `kubectl scale` sends it, with the resourceVersion the status
  // write returned: the job the decision was made from, or nothing.
  EXPECT_EQ(r[1].headers.at("content-type"), "application/merge-patch+json");
  EXPECT_EQ(json::parse(r[1].body),
            json::parse(R"j({"metadata": {"resourceVersion": "101"}, "spec": {"replicas": 4}})j"));
  EXPECT_EQ(EventReasons(), (std::vector<std::string>{"ScaledUp", "TrainingJobRunning"}));
  EXPECT_EQ(json::parse(r[2].body)["note"], "Gap 1.10 leaves room: 2 -> 4 trainers");
  EXPECT_TRUE(report.status_written);
  EXPECT_TRUE(report.scaled);
  EXPECT_EQ(report.writes, 2);

  // A decision recorded earlier (no status to write) carries the
  // resourceVersion it was observed with.
  ReconcilePlan again;
  again.scale_to = 4;
  const size_t before = server_->requests().size();
  ASSERT_TRUE(ExecutePlan(client_.get(), Job(), again, "op").ok());
  ASSERT_EQ(server_->requests().size(), before + 1);
  EXPECT_EQ(server_->requests()[before].path, kScalePath);
  EXPECT_EQ(json::parse(server_->requests()[before].body)["metadata"]["resourceVersion"], "100");
}

// The decision was not stored: nothing is scaled (the next reconcile
// decides again from the same window), no ScaledUp.
TEST_F(PlanExecutorTest, AStatusConflictScalesNothing) {
  Answer(ConflictAt(kStatusPath));
  ExecutionReport report;
  const Status s = ExecutePlan(client_.get(), Job(), GrowthPlan(), "op", &report);
  EXPECT_TRUE(kube::IsConflict(s)) << s.ToString();
  EXPECT_EQ(Calls(), (std::vector<std::string>{"PATCH " + kStatusPath}));
  EXPECT_FALSE(report.scaled);
  EXPECT_TRUE(EventReasons().empty());
}

// The decision is stored, the scale refused (the job changed since): the
// error says so, no ScaledUp is recorded; the status's decision is carried
// out later (job_autoscale.h).
TEST_F(PlanExecutorTest, AScaleConflictIsReturnedWithoutItsEvent) {
  Answer(ConflictAt(kScalePath));
  ExecutionReport report;
  const Status s = ExecutePlan(client_.get(), Job(), GrowthPlan(), "op", &report);
  EXPECT_TRUE(kube::IsConflict(s)) << s.ToString();
  EXPECT_NE(s.message().find("scale trainingjob default/mnist to 4 trainers: "), std::string::npos)
      << s.message();
  EXPECT_TRUE(report.status_written);
  EXPECT_FALSE(report.scaled);
  EXPECT_EQ(EventReasons(), (std::vector<std::string>{"TrainingJobRunning"}));
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
