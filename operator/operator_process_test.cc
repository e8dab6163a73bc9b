// Tests gaptrain-operator as a process against the in-test API server
// (FakeApiServer), with a test playing the kubelet through the server's
// hooks (pods never run here; operator_e2e_test runs them): bad flags;
// /healthz, /readyz and /metrics over HTTP; a job's life (created,
// a worker preempted and replaced, a failure past backoffLimit, TTL) using
// no permission outside OperatorPermissions(); a job it cannot read and
// API errors, which are reported and retried, never fatal; and leader
// election between two processes: one reconciles, SIGKILL hands over
// within the lease, SIGTERM at once, a stolen Lease makes the leader exit.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "operator/operator_permissions.h"
#include "operator/running_operator.h"
#include "operator/testing/fake_api_server.h"
#include "services/testing/test_files.h"
#include "services/testing/test_processes.h"

namespace gaptrain {
namespace {

using kube_testing::FakeApiServer;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

// Lease timings short enough for a test, long enough for a busy machine
// (the elector's calls may take up to lease - renew = 1 s).
const std::vector<std::string> kFastElection = {
    "--lease-duration-seconds", "3", "--renew-deadline-seconds", "2", "--retry-period-seconds",
    "0.25"};

json Job(const std::string& ns, const std::string& name, const json& extra_spec = json::object()) {
  json job = {{"apiVersion", "gaptrain.io/v1alpha1"},
              {"kind", "TrainingJob"},
              {"metadata", {{"name", name}, {"namespace", ns}}},
              {"spec",
               {{"model", {{"builtin", "lenet5"}}},
                {"data", {{"format", "mnist-idx"}, {"path", "/data/mnist"}}},
                {"training", {{"epochs", 1}}},
                {"workers", {{"replicas", 2}}}}}};
  job["spec"].merge_patch(extra_spec);
  return job;
}

// The next `count` requests `method` `path` (a trailing '*' is a prefix)
// fail with `code`.
kube_testing::Fault Fault(const std::string& method, const std::string& path, int code,
                          int count) {
  kube_testing::Fault fault;
  fault.method = method;
  fault.path = path;
  fault.code = code;
  fault.count = count;
  return fault;
}

std::string Phase(const json& job) { return job.value("status", json::object()).value("phase", ""); }

class OperatorProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TestDir("operator");
    const Status s = StartTrainingJobApiServer("operator-test-token", &server_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  std::unique_ptr<RunningOperator> StartOperator(const std::string& name,
                                                 std::vector<std::string> args = kFastElection) {
    std::unique_ptr<RunningOperator> op;
    const Status s = RunningOperator::Start(dir_, name, server_->Kubeconfig(), args, &op);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return op;
  }

  // Runs the binary to its end; its exit status and output.
  int RunToExit(const std::vector<std::string>& args, std::string* output) {
    const std::string log = dir_ + "/run-" + std::to_string(++runs_) + ".log";
    Process::Spec spec;
    spec.binary = "operator/gaptrain-operator";
    spec.args = args;
    spec.log_file = log;
    std::unique_ptr<Process> p;
    EXPECT_TRUE(Process::Start(spec, &p).ok());
    if (p == nullptr || !p->WaitExit(seconds(20))) return -1;
    *output = ReadRaw(log);
    return p->wait_status();
  }

  json Get(const std::string& resource, const std::string& ns, const std::string& name) {
    json object;
    return server_->Get(resource, ns, name, &object).ok() ? object : json();
  }

  bool WaitForJob(const std::string& ns, const std::string& name,
                  const std::function<bool(const json&)>& predicate,
                  milliseconds timeout = seconds(20)) {
    return server_->WaitForObject("trainingjobs", ns, name,
                                  [&](const json* job) { return job != nullptr && predicate(*job); },
                                  timeout);
  }

  std::vector<json> Pods(const std::string& ns, const std::string& job) {
    std::vector<json> pods;
    EXPECT_TRUE(server_->List("pods", ns, "gaptrain.io/job-name=" + job, &pods).ok());
    return pods;
  }

  // The test's kubelet: the pod runs, ready, at `ip`.
  void MarkRunning(const std::string& ns, const std::string& name, const std::string& ip) {
    const Status s = server_->Update("pods", ns, name, [&](json* pod) {
      (*pod)["status"] = {
          {"phase", "Running"},
          {"podIP", ip},
          {"conditions", {{{"type", "Ready"}, {"status", "True"}}}},
          {"containerStatuses",
           {{{"name", "gaptrain"}, {"ready", true}, {"state", {{"running", json::object()}}}}}}};
    });
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  std::vector<std::string> EventReasons(const std::string& ns) {
    std::vector<json> events;
    EXPECT_TRUE(server_->List("events", ns, "", &events).ok());
    std::vector<std::string> reasons;
    for (const json& e : events) reasons.push_back(e.value("reason", ""));
    return reasons;
  }

  std::string dir_;
  std::unique_ptr<FakeApiServer> server_;
  int runs_ = 0;
};

TEST_F(OperatorProcessTest, BadFlagsExitTwoNamingTheFlag) {
  std::string out;
  int status = RunToExit({"--workers", "0"}, &out);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << DescribeWaitStatus(status);
  EXPECT_NE(out.find("gaptrain-operator: --workers: must be an integer in [1, 64], got '0'"),
            std::string::npos)
      << out;
  status = RunToExit({"--leader-elect", "maybe"}, &out);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2);
  EXPECT_NE(out.find("--leader-elect: must be true or false, got 'maybe'"), std::string::npos);

  status = RunToExit({"--help"}, &out);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(out.rfind("usage: gaptrain-operator", 0), 0u) << out;

  // Flags that parse but name a cluster that is not there: exit 1, saying why.
  status = RunToExit({"--kubeconfig", dir_ + "/missing", "--metrics-port", "0",
                      "--health-port", "0"},
                     &out);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << DescribeWaitStatus(status);
  EXPECT_NE(out.find(dir_ + "/missing"), std::string::npos) << out;
}

TEST_F(OperatorProcessTest, HealthReadinessAndMetricsOverHttp) {
  // The TrainingJob list fails until the fault is cleared: not ready, but alive.
  server_->InjectFault(Fault("GET", "/apis/gaptrain.io/v1alpha1/trainingjobs", 503, 1000));
  std::unique_ptr<RunningOperator> op = StartOperator("op");
  ASSERT_NE(op, nullptr);
  HttpClientResponse r;
  ASSERT_TRUE(op->GetHealth("/healthz", &r).ok());
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok");
  // The other caches fill; the TrainingJobs' cannot.
  EXPECT_TRUE(Eventually([&] {
    return op->GetHealth("/readyz", &r).ok() && r.body == "informers not synced: trainingjobs";
  })) << r.body;
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(op->Metric("gaptrain_operator_is_leader", -1), 0) << "no leader before the caches";

  server_->ClearFaults();
  EXPECT_TRUE(Eventually(
      [&] { return op->GetHealth("/readyz", &r).ok() && r.status == 200; }, seconds(20)))
      << op->Log();
  EXPECT_TRUE(Eventually([&] { return op->Metric("gaptrain_operator_is_leader") == 1; },
                         seconds(20)));
  const MetricsSample m = op->Metrics();
  for (const char* series :
       {"gaptrain_operator_jobs_created_total", "gaptrain_operator_jobs_succeeded_total",
        "gaptrain_operator_jobs_restarted_total", "gaptrain_operator_preemptions_total",
        "gaptrain_operator_worker_failures_total", "gaptrain_operator_work_queue_depth",
        "gaptrain_operator_reconcile_duration_seconds_count"}) {
    EXPECT_EQ(m.count(series), 1u) << series;
  }
}

// A job's life, with the test as the kubelet: created, a worker preempted
// and replaced, a genuine failure past backoffLimit 0 fails the job, and
// ttlSecondsAfterFinished 0 deletes it. Every request the operator sent is
// allowed by OperatorPermissions(), and every permission there was needed.
TEST_F(OperatorProcessTest, AJobsLifeUsesExactlyTheDeclaredPermissions) {
  std::unique_ptr<RunningOperator> op = StartOperator("op");
  ASSERT_NE(op, nullptr);
  ASSERT_TRUE(server_->Create(Job("team-a", "mnist",
                                  {{"runPolicy", {{"backoffLimit", 0},
                                                  {"ttlSecondsAfterFinished", 0}}}}))
                  .ok());
  ASSERT_TRUE(Eventually([&] { return Pods("team-a", "mnist").size() == 5; }, seconds(20)))
      << op->Log();
  int ip = 10;
  for (const json& pod : Pods("team-a", "mnist")) {
    MarkRunning("team-a", pod["metadata"]["name"], "10.0.0." + std::to_string(ip++));
  }
  ASSERT_TRUE(WaitForJob("team-a", "mnist", [](const json& j) { return Phase(j) == "Running"; }))
      << Get("trainingjobs", "team-a", "mnist").dump(2) << op->Log();

  // A spot reclaim: DisruptionTarget on trainer 0.
  const std::string old_uid = Get("pods", "team-a", "mnist-trainer-0")["metadata"]["uid"];
  ASSERT_TRUE(server_
                  ->Update("pods", "team-a", "mnist-trainer-0",
                           [](json* pod) {
                             (*pod)["status"]["conditions"].push_back(
                                 {{"type", "DisruptionTarget"},
                                  {"status", "True"},
                                  {"reason", "TerminationByKubelet"}});
                           })
                  .ok());
  ASSERT_TRUE(WaitForJob("team-a", "mnist", [](const json& j) {
    return j["status"].value("preemptions", 0) == 1;
  })) << op->Log();
  ASSERT_TRUE(Eventually([&] {
    const json replacement = Get("pods", "team-a", "mnist-trainer-0");
    return replacement.is_object() && replacement["metadata"]["uid"] != old_uid;
  }));

  // A genuine failure of trainer 1: past backoffLimit 0, the job fails and,
  // with ttlSecondsAfterFinished 0, is deleted with its children.
  ASSERT_TRUE(server_
                  ->Update("pods", "team-a", "mnist-trainer-1",
                           [](json* pod) {
                             (*pod)["status"]["phase"] = "Failed";
                             (*pod)["status"]["containerStatuses"] = {
                                 {{"name", "gaptrain"},
                                  {"state", {{"terminated", {{"exitCode", 1}, {"reason", "Error"}}}}}}};
                           })
                  .ok());
  ASSERT_TRUE(server_->WaitForObject("trainingjobs", "team-a", "mnist",
                                     [](const json* job) { return job == nullptr; }, seconds(20)))
      << op->Log();
  EXPECT_TRUE(Eventually([&] { return Pods("team-a", "mnist").empty(); }, seconds(10)));
  const std::vector<std::string> reasons = EventReasons("team-a");
  for (const char* reason : {"TrainingJobCreated", "TrainingJobRunning", "WorkerPreempted",
                             "WorkerFailed", "BackoffLimitExceeded", "TrainingJobDeleted"}) {
    EXPECT_NE(std::find(reasons.begin(), reasons.end(), reason), reasons.end()) << reason;
  }
  EXPECT_TRUE(Eventually([&] {
    return op->Metric("gaptrain_operator_jobs_failed_total{reason=\"BackoffLimitExceeded\"}") == 1;
  }));
  const MetricsSample m = op->Metrics();
  EXPECT_EQ(MetricValue(m, "gaptrain_operator_jobs_created_total"), 1);
  EXPECT_EQ(MetricValue(m, "gaptrain_operator_preemptions_total"), 1);
  EXPECT_EQ(MetricValue(m, "gaptrain_operator_worker_failures_total"), 1);
  // Renewals happen every retry period.
  EXPECT_TRUE(Eventually([&] { return server_->CountRequests("update", "leases") > 0; }));

  const std::vector<kube::RbacPermission> allowed = OperatorPermissions();
  std::set<kube::RbacPermission> used;
  for (const kube_testing::RequestRecord& r : server_->RequestLog()) {
    ASSERT_FALSE(r.verb.empty()) << "a non-resource request: " << r.method << " " << r.path;
    const kube::RbacPermission p = RequestPermission(r.group, r.resource, r.subresource, r.verb);
    EXPECT_TRUE(std::binary_search(allowed.begin(), allowed.end(), p))
        << r.method << " " << r.path << " needs " << p.group << "/" << p.resource << " " << p.verb;
    used.insert(p);
  }
  for (const kube::RbacPermission& p : allowed) {
    EXPECT_EQ(used.count(p), 1u) << "declared but never used: " << p.group << "/" << p.resource
                                 << " " << p.verb;
  }
}

// Bad input never crashes the operator: a spec the parser refuses and a
// template the API would refuse fail their jobs with FailedValidation and
// the field's name; API errors are retried with backoff and counted.
TEST_F(OperatorProcessTest, BadJobsFailValidationAndApiErrorsAreRetried) {
  std::unique_ptr<RunningOperator> op = StartOperator("op", {"--leader-elect=false"});
  ASSERT_NE(op, nullptr);
  ASSERT_TRUE(server_->Create(Job("default", "too-few", {{"workers", {{"replicas", 2},
                                                                      {"minReplicas", 3}}}}))
                  .ok());
  ASSERT_TRUE(server_->Create(Job("default", "bad-template",
                                  {{"master", {{"template", {{"spec", {{"containers", "x"}}}}}}}}))
                  .ok());
  for (const char* name : {"too-few", "bad-template"}) {
    ASSERT_TRUE(WaitForJob("default", name, [](const json& j) { return Phase(j) == "Failed"; }))
        << name << "\n" << op->Log();
    const json job = Get("trainingjobs", "default", name);
    bool found = false;
    for (const json& c : job["status"]["conditions"]) {
      if (c["type"] != "Failed") continue;
      found = true;
      EXPECT_EQ(c["reason"], "FailedValidation");
      const std::string field = name == std::string("too-few") ? "spec.workers.minReplicas"
                                                               : "spec.master.template";
      EXPECT_NE(c["message"].get<std::string>().find(field), std::string::npos) << c.dump();
    }
    EXPECT_TRUE(found) << job.dump(2);
    EXPECT_TRUE(Pods("default", name).empty()) << "nothing is created for a job that failed";
  }

  // The API server refuses the first pod applies: reported, retried, done.
  server_->InjectFault(Fault("PATCH", "/api/v1/namespaces/default/pods/*", 500, 3));
  ASSERT_TRUE(server_->Create(Job("default", "good")).ok());
  EXPECT_TRUE(Eventually([&] { return Pods("default", "good").size() == 5; }, seconds(20)))
      << op->Log();
  EXPECT_GE(op->Metric("gaptrain_operator_reconcile_errors_total{reason=\"Unavailable\"}"), 1);
  EXPECT_NE(op->Log().find("job=default/good reconcile failed (Unavailable), retrying"),
            std::string::npos)
      << op->Log();
  EXPECT_TRUE(op->process()->Running());
  HttpClientResponse r;
  ASSERT_TRUE(op->GetHealth("/healthz", &r).ok());
  EXPECT_EQ(r.status, 200);
}

// Two replicas: only the leader reconciles; SIGKILL of the leader hands
// over within the lease duration.
TEST_F(OperatorProcessTest, OnlyTheLeaderReconcilesAndAStandbyTakesOverAfterSigkill) {
  std::unique_ptr<RunningOperator> a = StartOperator("op-a");
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(Eventually([&] { return a->Metric("gaptrain_operator_is_leader") == 1; }))
      << a->Log();
  std::unique_ptr<RunningOperator> b = StartOperator("op-b");
  ASSERT_NE(b, nullptr);
  HttpClientResponse r;
  ASSERT_TRUE(Eventually([&] { return b->GetHealth("/readyz", &r).ok() && r.status == 200; }))
      << "a standby is ready too";

  ASSERT_TRUE(server_->Create(Job("default", "first")).ok());
  ASSERT_TRUE(Eventually([&] { return Pods("default", "first").size() == 5; })) << a->Log();
  EXPECT_TRUE(Eventually(
      [&] { return a->Metric("gaptrain_operator_reconcile_duration_seconds_count") >= 1; }));
  EXPECT_EQ(b->Metric("gaptrain_operator_is_leader", -1), 0);
  EXPECT_EQ(b->Metric("gaptrain_operator_reconcile_duration_seconds_count", -1), 0);

  a->process()->Signal(SIGKILL);
  const Clock::time_point killed = Clock::now();
  ASSERT_TRUE(Eventually([&] { return b->Metric("gaptrain_operator_is_leader") == 1; },
                         seconds(10)))
      << b->Log();
  const auto takeover = std::chrono::duration_cast<milliseconds>(Clock::now() - killed);
  // The lease (3 s) ran out at most 3 s after the kill; the standby tries
  // every retry period (0.25 s) plus jitter (up to 0.3 s); the rest is
  // slack for a busy machine.
  EXPECT_LT(takeover, milliseconds(3000 + 550 + 1000)) << takeover.count() << " ms";
  std::printf("standby took over %lld ms after the leader was killed (lease 3 s)\n",
              static_cast<long long>(takeover.count()));
  ASSERT_TRUE(server_->Create(Job("default", "second")).ok());
  EXPECT_TRUE(Eventually([&] { return Pods("default", "second").size() == 5; })) << b->Log();
}

// SIGTERM drains, releases the Lease and exits 0: the standby takes over
// at its next retry, long before the lease would expire.
TEST_F(OperatorProcessTest, SigtermReleasesTheLeaseAtOnce) {
  const std::vector<std::string> long_lease = {"--lease-duration-seconds", "30",
                                               "--renew-deadline-seconds", "20",
                                               "--retry-period-seconds", "0.25"};
  std::unique_ptr<RunningOperator> a = StartOperator("op-a", long_lease);
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(Eventually([&] { return a->Metric("gaptrain_operator_is_leader") == 1; }));
  std::unique_ptr<RunningOperator> b = StartOperator("op-b", long_lease);
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(Eventually([&] {
    return b->Log().find("the leader is op-a_") != std::string::npos;
  })) << b->Log();

  a->process()->Signal(SIGTERM);
  const Clock::time_point signalled = Clock::now();
  ASSERT_TRUE(a->process()->WaitExit(seconds(10)));
  EXPECT_TRUE(WIFEXITED(a->process()->wait_status()) &&
              WEXITSTATUS(a->process()->wait_status()) == 0)
      << DescribeWaitStatus(a->process()->wait_status()) << a->Log();
  ASSERT_TRUE(Eventually([&] { return b->Metric("gaptrain_operator_is_leader") == 1; },
                         seconds(10)));
  const auto takeover = std::chrono::duration_cast<milliseconds>(Clock::now() - signalled);
  EXPECT_LT(takeover, seconds(5)) << "not the 30 s lease";
  const json lease = Get("leases", "default", "gaptrain-operator");
  EXPECT_EQ(lease["spec"]["holderIdentity"].get<std::string>().rfind("op-b_", 0), 0u)
      << lease.dump(2);
}

// Another holder takes the Lease (as after a network partition): the
// leader stops reconciling and exits non-zero, to be restarted as a
// standby.
TEST_F(OperatorProcessTest, ALostLeaseExitsNonZero) {
  std::unique_ptr<RunningOperator> op = StartOperator("op");
  ASSERT_NE(op, nullptr);
  ASSERT_TRUE(Eventually([&] { return op->Metric("gaptrain_operator_is_leader") == 1; }));
  std::string now = server_->Now();  // "...:57Z" -> "...:57.000000Z", a MicroTime
  now.insert(now.size() - 1, ".000000");
  ASSERT_TRUE(server_
                  ->Update("leases", "default", "gaptrain-operator",
                           [&](json* lease) {
                             (*lease)["spec"]["holderIdentity"] = "usurper";
                             (*lease)["spec"]["leaseDurationSeconds"] = 600;
                             (*lease)["spec"]["renewTime"] = now;
                           })
                  .ok());
  ASSERT_TRUE(op->process()->WaitExit(seconds(10))) << op->Log();
  EXPECT_TRUE(WIFEXITED(op->process()->wait_status()) &&
              WEXITSTATUS(op->process()->wait_status()) == 1)
      << DescribeWaitStatus(op->process()->wait_status());
  EXPECT_NE(op->Log().find("leader election lost"), std::string::npos) << op->Log();
}

}  // namespace
}  // namespace gaptrain
