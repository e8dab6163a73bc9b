// Tests gaptrain-operator as a process against a real kube-apiserver
// (operator/envtest, one control plane with the controller manager for the
// whole binary), with RBAC enforced and the operator authenticated as its
// ServiceAccount bound to exactly the shipped ClusterRole: deploy/'s, and
// the chart's as the real Helm engine renders it. The test plays the
// kubelet through the API (pods never run here; operator_e2e_test runs
// them). Covered: bad flags; /healthz, /readyz and /metrics; a job's life
// (created, a worker preempted and replaced, scaled, suspended and resumed,
// a failure past backoffLimit, TTL) with no request refused and, from the
// API server's audit log, nothing used outside OperatorPermissions(); bad
// jobs and refused writes, which are reported and retried, never fatal;
// leader election between two processes: one reconciles, SIGKILL hands
// over within the lease, SIGTERM at once, a stolen Lease makes the leader
// exit; and, with kube-scheduler and a Node the test registers as a
// kubelet would, jobs that wait or are refused say why (issue 28): a spot
// job without a spot node shows the scheduler's reason until the node is
// labelled, a namespace enforcing PodSecurity "restricted" admits the
// example job's pods, and a pod it refuses is a FailedCreate Warning; and
// a job that succeeds exports its model to spec.output's claim (the
// coordinator's /status served by the test from a pod network namespace).
// Issue 31: a job with Gap-aware autoscaling grows and shrinks through the
// scale subresource on the Gap of a fake master's /metrics.
// Issue 39: every job gets a NetworkPolicy the API server accepts (its
// pods selected, only its own traffic admitted), which kubectl lists and
// the garbage collector deletes with the job, none with
// --network-policy=false; the operator may create Secrets and nothing
// more (kubectl auth can-i), and the job's token survives its pods being
// recreated. No network plugin runs here: nothing enforces the policies.
// Issue 29: the API server runs the OwnerReferencesPermissionEnforcement
// admission plugin (OpenShift's default), so every job here is run by an
// operator whose children's blockOwnerDeletion needs `update` on
// trainingjobs/finalizers; the operator gives job pods the image of its own
// pod's container, and will not start when it cannot read that pod; users
// bound to Kubernetes' edit or view roles get the TrainingJob rules
// aggregated into them (deploy/rbac/aggregated_roles.yaml).

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "operator/envtest/api_resources.h"
#include "operator/envtest/control_plane.h"
#include "operator/envtest/shared_control_plane.h"
#include "operator/kube/api_error.h"
#include "operator/kube/resource.h"
#include "operator/operator_permissions.h"
#include "operator/operator_process.h"
#include "tests/cluster/running_operator.h"
#include "tests/cluster/test_install.h"
#include "operator/testing/coordinator_status_examples.h"
#include "operator/testing/pod_network.h"
#include "operator/trainingjob/desired_children.h"
#include "services/api/master_metric_names.h"
#include "services/net/http_server.h"
#include "services/testing/missing_requirement.h"
#include "services/testing/status_assertions.h"
#include "services/testing/test_files.h"
#include "services/testing/test_processes.h"

namespace gaptrain {
namespace {

using envtest::AuditRecord;
using envtest::ControlPlane;
using envtest::kClusterRoleBindings;
using envtest::kClusterRoles;
using envtest::kNamespaces;
using envtest::kNodes;
using envtest::kPersistentVolumes;
using envtest::kResourceQuotas;
using envtest::kRoleBindings;
using envtest::kServiceAccounts;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

// Lease timings short enough for a test, long enough for a busy machine
// (the elector's calls may take up to lease - renew = 1 s).
const std::vector<std::string> kFastElection = {
    "--lease-duration-seconds", "3", "--renew-deadline-seconds", "2", "--retry-period-seconds",
    "0.25"};

// The image of the operator's own pod in the tests that give it one: what
// its job pods must get.
constexpr char kOwnImage[] = "registry.example.com/gaptrain:9.9";

using Env = std::vector<std::pair<std::string, std::string>>;

// Runs `cleanup` when it goes out of scope (a failed ASSERT included).
struct Cleanup {
  std::function<void()> cleanup;
  ~Cleanup() { cleanup(); }
};

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

std::string Phase(const json& job) { return job.value("status", json::object()).value("phase", ""); }

// Now as a Kubernetes MicroTime ("2026-11-26T17:23:21.000000Z").
std::string MicroTimeNow() {
  const std::time_t now = std::time(nullptr);
  std::tm utc;
  gmtime_r(&now, &utc);
  char buf[40];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S.000000Z", &utc);
  return buf;
}

// Runs `fn` on a thread that has entered the network namespace at `path`:
// the sockets it opens belong to that namespace for their whole life.
Status InNetworkNamespace(const std::string& path, const std::function<Status()>& fn) {
  Status result;
  std::thread thread([&] {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
      result = Status::Internal("cannot enter network namespace " + path + ": " +
                                std::strerror(errno));
    } else {
      result = fn();
    }
    if (fd >= 0) close(fd);
  });
  thread.join();
  return result;
}

class OperatorProcessTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ControlPlane::Options options;
    options.work_dir = TestTempDir("cluster");
    options.controller_manager = true;  // garbage collection, quotas
    // Pods wait for a node with the scheduler's own reason (no Node but in
    // the tests that register one: elsewhere every pod waits, as before).
    options.scheduler = true;
    options.audit = true;
    // As on OpenShift: the children's blockOwnerDeletion needs `update` on
    // trainingjobs/finalizers, in every test of this binary.
    options.admission_plugins = {"OwnerReferencesPermissionEnforcement"};
    options.crd_files = {kTrainingJobCrdFile};
    envtest::SharedControlPlane::Start(options);
    if (envtest::SharedControlPlane::Get() != nullptr) {
      rbac_installed_ =
          InstallOperatorRbac(envtest::SharedControlPlane::Get(), RbacSource::kDeploy);
    }
  }
  static void TearDownTestSuite() { envtest::SharedControlPlane::Stop(); }

  void SetUp() override {
    GAPTRAIN_REQUIRE_SHARED_CONTROL_PLANE();
    cluster_ = envtest::SharedControlPlane::Get();
    ASSERT_TRUE(rbac_installed_.ok()) << rbac_installed_.ToString();
    dir_ = TestDir("operator");
    // Each test elects on a Lease of its own: a killed leader of an earlier
    // test must not hold this one's.
    lease_name_ = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::transform(lease_name_.begin(), lease_name_.end(), lease_name_.begin(),
                   [](char c) { return static_cast<char>(std::tolower(c)); });
  }

  kube::Client* admin() { return cluster_->admin(); }

  // The operator as the shipped ServiceAccount, or as `kubeconfig`, with
  // `env` added to its environment.
  std::unique_ptr<RunningOperator> StartOperator(const std::string& name,
                                                 std::vector<std::string> args = kFastElection,
                                                 std::string kubeconfig = "",
                                                 const Env& env = {}) {
    if (kubeconfig.empty()) {
      const Status s = OperatorKubeconfig(cluster_, &kubeconfig);
      EXPECT_TRUE(s.ok()) << s.ToString();
    }
    args.insert(args.end(), {"--lease-name", lease_name_});
    std::unique_ptr<RunningOperator> op;
    const Status s = RunningOperator::Start(dir_, name, kubeconfig, args, &op, env);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return op;
  }

  // Runs the binary to its end; its exit status and output.
  int RunToExit(const std::vector<std::string>& args, std::string* output,
                const Env& env = {}) {
    const std::string log = dir_ + "/run-" + std::to_string(++runs_) + ".log";
    Process::Spec spec;
    spec.binary = "operator/gaptrain-operator";
    spec.args = args;
    spec.env = env;
    spec.log_file = log;
    std::unique_ptr<Process> p;
    EXPECT_TRUE(Process::Start(spec, &p).ok());
    if (p == nullptr || !p->WaitExit(seconds(20))) return -1;
    *output = ReadRaw(log);
    return p->wait_status();
  }

  void CreateNamespace(const std::string& ns) {
    const Status s = cluster_->CreateNamespace(ns);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  void CreateJob(const json& job) {
    const std::string ns = job["metadata"]["namespace"];
    const Status s = admin()->Create(kube::kTrainingJobs, ns, job, nullptr);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  json Get(const kube::Resource& resource, const std::string& ns, const std::string& name) {
    json object;
    return admin()->Get(resource, ns, name, &object).ok() ? object : json();
  }

  bool WaitForJob(const std::string& ns, const std::string& name,
                  const std::function<bool(const json&)>& predicate,
                  milliseconds timeout = seconds(30)) {
    return Eventually(
        [&] {
          const json job = Get(kube::kTrainingJobs, ns, name);
          return job.is_object() && predicate(job);
        },
        timeout);
  }

  std::vector<json> Pods(const std::string& ns, const std::string& job) {
    kube::ListOptions options;
    options.label_selector = "gaptrain.io/job-name=" + job;
    kube::ObjectList list;
    EXPECT_TRUE(admin()->List(kube::kPods, ns, options, &list).ok());
    return list.items;
  }

  // The test's kubelet: a read-modify-write of the pod's status.
  void WriteStatus(const std::string& ns, const std::string& name,
                   const std::function<void(json*)>& change) {
    Status s;
    for (int attempt = 0; attempt < 5; ++attempt) {
      json pod;
      s = admin()->Get(kube::kPods, ns, name, &pod);
      if (!s.ok()) break;
      change(&pod["status"]);
      s = admin()->Update(kube::kPods.Subresource("status"), ns, pod, nullptr);
      if (!kube::IsConflict(s)) break;
    }
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  // The pod runs, ready, at `ip`.
  // The coordinator's and the master's HTTP endpoints of a job, served by
  // the test on their real ports at a pod's IP. The pods' fixed ports are
  // served in a network namespace of their own, as on a node: a test
  // elsewhere on this machine listening on 0.0.0.0 at the same port cannot
  // take them.
  struct JobEndpoints {
    std::unique_ptr<kube_testing::PodNetwork> network;
    std::string ip;
    std::unique_ptr<HttpServer> coordinator, master;
  };
  // The coordinator answers GET /status with `coordinator_status`; the
  // test adds the master's /metrics. Skips (fails in CI) where network
  // namespaces cannot be made.
  void ServeJobEndpoints(const std::string& coordinator_status, JobEndpoints* endpoints) {
    Status s = kube_testing::PodNetwork::Create(dir_, &endpoints->network);
    if (s.code() == Status::Code::kPermissionDenied) GAPTRAIN_SKIP_OR_FAIL_IN_CI(s.message());
    ASSERT_TRUE(s.ok()) << s.ToString();
    kube_testing::PodNetwork::PodInterface pod_interface;
    ASSERT_OK(endpoints->network->AddPod(&pod_interface));
    endpoints->ip = pod_interface.ip;
    ASSERT_OK(InNetworkNamespace(pod_interface.namespace_path, [&] {
      Status started = HttpServer::Start(endpoints->ip, trainingjob::kCoordinatorHttpPort,
                                         &endpoints->coordinator);
      if (!started.ok()) return started;
      return HttpServer::Start(endpoints->ip, trainingjob::kMasterHttpPort, &endpoints->master);
    }));
    endpoints->coordinator->Handle("/status", [coordinator_status](const HttpRequest&) {
      HttpResponse r;
      r.content_type = "application/json";
      r.body = coordinator_status;
      return r;
    });
  }

  // Every pod of job `name` Running: the workers first, at addresses in
  // `worker_subnet` ("10.0.1."), then the master and the coordinator at
  // `endpoints_ip`, where the test serves their HTTP endpoints.
  void MarkJobRunning(const std::string& ns, const std::string& name,
                      const std::string& endpoints_ip, const std::string& worker_subnet) {
    const std::string master = name + "-master", coordinator = name + "-coordinator";
    for (const json& pod : Pods(ns, name)) {
      const std::string pod_name = pod["metadata"]["name"];
      if (pod_name == coordinator || pod_name == master) continue;
      MarkRunning(ns, pod_name, worker_subnet + std::to_string(next_ip_++));
    }
    MarkRunning(ns, master, endpoints_ip);
    MarkRunning(ns, coordinator, endpoints_ip);
  }

  void MarkRunning(const std::string& ns, const std::string& name, const std::string& ip) {
    WriteStatus(ns, name, [&](json* status) {
      (*status)["phase"] = "Running";
      (*status)["podIP"] = ip;
      (*status)["podIPs"] = {{{"ip", ip}}};
      (*status)["conditions"] = {{{"type", "Ready"}, {"status", "True"}}};
      (*status)["containerStatuses"] = {{{"name", "gaptrain"},
                                         {"ready", true},
                                         {"restartCount", 0},
                                         {"image", "gaptrain"},
                                         {"imageID", ""},
                                         {"state", {{"running", json::object()}}}}};
    });
  }

  // Marks every pod of the job that does not run yet running, at fresh IPs.
  void RunAllPods(const std::string& ns, const std::string& job) {
    for (const json& pod : Pods(ns, job)) {
      if (pod.value("status", json::object()).value("phase", "") == "Running") continue;
      MarkRunning(ns, pod["metadata"]["name"], "10.0.0." + std::to_string(next_ip_++));
    }
  }

  // The condition `type` of the job's status, or {} when it has none.
  static json ConditionOf(const json& job, const std::string& type) {
    if (!job.is_object()) return json::object();
    for (const json& c : job.value("status", json::object()).value("conditions", json::array())) {
      if (c.value("type", "") == type) return c;
    }
    return json::object();
  }

  // The Events about job ns/name, oldest first.
  std::vector<json> JobEvents(const std::string& ns, const std::string& name) {
    kube::ObjectList events;
    EXPECT_TRUE(admin()->List(kube::kEvents, ns, kube::ListOptions(), &events).ok());
    std::vector<json> about;
    for (const json& e : events.items) {
      if (e.value("regarding", json::object()).value("name", "") == name) about.push_back(e);
    }
    return about;
  }

  int CountEvents(const std::string& ns, const std::string& name, const std::string& reason) {
    int n = 0;
    for (const json& e : JobEvents(ns, name)) n += e.value("reason", "") == reason;
    return n;
  }

  // A Node as a kubelet registers one: Ready, with room for pods, without
  // the not-ready taint the API adds to new Nodes (no node lifecycle
  // controller runs here to lift it).
  void RegisterNode(const std::string& name) {
    const json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", name}}}};
    ASSERT_TRUE(admin()->Create(kNodes, "", node, nullptr).ok());
    const json status = {
        {"status",
         {{"conditions", {{{"type", "Ready"}, {"status", "True"}, {"reason", "KubeletReady"}}}},
          {"allocatable", {{"cpu", "4"}, {"memory", "8Gi"}, {"pods", "110"}}},
          {"capacity", {{"cpu", "4"}, {"memory", "8Gi"}, {"pods", "110"}}}}}};
    ASSERT_TRUE(admin()->MergePatch(kNodes.Subresource("status"), "", name, status, nullptr).ok());
    ASSERT_TRUE(
        admin()->MergePatch(kNodes, "", name, {{"spec", {{"taints", nullptr}}}}, nullptr).ok());
  }

  // PersistentVolumes bound ahead to the job's two claims (nothing here
  // provisions volumes), so its master and coordinator can be scheduled.
  void VolumesForClaimsOf(const std::string& ns, const std::string& job) {
    for (const auto& [claim, size] : {std::pair<std::string, const char*>{job + "-checkpoints",
                                                                          "5Gi"},
                                      {job + "-coordinator-state", "1Gi"}}) {
      const json volume = {
          {"apiVersion", "v1"},
          {"kind", "PersistentVolume"},
          {"metadata", {{"name", ns + "-" + claim}}},
          {"spec",
           {{"capacity", {{"storage", size}}},
            {"accessModes", {"ReadWriteOnce"}},
            {"persistentVolumeReclaimPolicy", "Retain"},
            {"hostPath", {{"path", "/tmp/" + ns + "-" + claim}}},
            {"claimRef", {{"namespace", ns}, {"name", claim}}}}}};
      const Status s = admin()->Create(kPersistentVolumes, "", volume, nullptr);
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
  }

  // A namespace that enforces PodSecurity "restricted", as hardened
  // clusters label theirs. Returns once the admission enforces it (it
  // reads namespaces from a cache): a bare pod, which runs as root, is
  // refused.
  void CreateRestrictedNamespace(const std::string& ns) {
    const json namespace_object = {
        {"apiVersion", "v1"},
        {"kind", "Namespace"},
        {"metadata",
         {{"name", ns},
          {"labels",
           {{"pod-security.kubernetes.io/enforce", "restricted"},
            {"pod-security.kubernetes.io/enforce-version", "latest"}}}}}};
    Status s = admin()->Create(kNamespaces, "", namespace_object, nullptr);
    ASSERT_TRUE(s.ok()) << s.ToString();
    const json bare = {{"apiVersion", "v1"},
                       {"kind", "Pod"},
                       {"metadata", {{"name", "probe"}}},
                       {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}};
    std::string refusal;
    ASSERT_TRUE(Eventually([&] {
      kube::ApiError error;
      s = admin()->Create(kube::kPods, ns, bare, nullptr, &error);
      if (s.ok()) {
        admin()->Delete(kube::kPods, ns, "probe", kube::DeleteOptions()).ok();
        return false;
      }
      refusal = error.message;
      return error.http_status == 403 &&
             refusal.find("violates PodSecurity") != std::string::npos;
    })) << s.ToString();
  }

  std::vector<std::string> EventReasons(const std::string& ns) {
    kube::ObjectList events;
    EXPECT_TRUE(admin()->List(kube::kEvents, ns, kube::ListOptions(), &events).ok());
    std::vector<std::string> reasons;
    for (const json& e : events.items) reasons.push_back(e.value("reason", ""));
    return reasons;
  }

  // A pod in the operator's namespace as its Deployment makes one: a
  // container "operator" with `image`, after a sidecar's. Nothing runs it
  // (no Node here); it exists for the operator to read its own image from
  // ($POD_NAME). Returns its name, made from the test's.
  std::string CreateOperatorPod(const std::string& image) {
    const std::string name = "gaptrain-operator-" + lease_name_.substr(0, 40);
    const json pod = {
        {"apiVersion", "v1"},
        {"kind", "Pod"},
        {"metadata", {{"name", name}}},
        {"spec",
         {{"containers",
           {{{"name", "sidecar"}, {"image", "registry.example.com/sidecar:1"}},
            {{"name", "operator"}, {"image", image}, {"command", {"gaptrain-operator"}}}}}}}};
    const Status s = admin()->Create(kube::kPods, kOperatorNamespace, pod, nullptr);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return name;
  }

  // The environment the downward API gives the operator's container.
  static Env InCluster(const std::string& pod_name) {
    return {{"POD_NAME", pod_name}, {"POD_NAMESPACE", kOperatorNamespace}};
  }

  // The operator's requests, from the API server's audit log.
  std::vector<AuditRecord> OperatorRequests() {
    std::vector<AuditRecord> records;
    const Status s = gaptrain::OperatorRequests(*cluster_, &records);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return records;
  }

  // The NetworkPolicy of job ns/job as the API server stored it: it selects
  // the job's pods, isolates their ingress, and admits the job's pods to
  // the gRPC ports, the operator's pods (label app.kubernetes.io/part-of:
  // gaptrain in `operator_ns`, a namespace the selector's label does name)
  // to the HTTP ports and, with `prometheus_ns`, its pods to every
  // /metrics port; owned by the job, and listed by `kubectl get
  // networkpolicy`.
  void ExpectJobNetworkPolicy(const std::string& ns, const std::string& job,
                              const std::string& operator_ns,
                              const std::string& prometheus_ns = "") {
    json policy;
    ASSERT_TRUE(Eventually([&] {
      policy = Get(kube::kNetworkPolicies, ns, job + "-ingress");
      return policy.is_object();
    })) << "no NetworkPolicy " << ns << "/" << job << "-ingress";
    const json job_pods = {{"matchLabels", {{"gaptrain.io/job-name", job}}}};
    EXPECT_EQ(policy["spec"]["podSelector"], job_pods);
    EXPECT_EQ(policy["spec"]["policyTypes"], json({"Ingress"}));
    const json& ingress = policy["spec"]["ingress"];
    ASSERT_EQ(ingress.size(), prometheus_ns.empty() ? 2u : 3u) << policy.dump(2);
    EXPECT_EQ(ingress[0]["from"], json::array({{{"podSelector", job_pods}}}));
    EXPECT_EQ(ingress[0]["ports"], json::parse(R"([{"protocol": "TCP", "port": 7070},
                                                   {"protocol": "TCP", "port": 7071}])"));
    EXPECT_EQ(ingress[1]["from"],
              json::parse(R"([{"namespaceSelector": {"matchLabels":
                                  {"kubernetes.io/metadata.name": ")" + operator_ns + R"("}},
                               "podSelector": {"matchLabels":
                                  {"app.kubernetes.io/part-of": "gaptrain"}}}])"));
    EXPECT_EQ(ingress[1]["ports"], json::parse(R"([{"protocol": "TCP", "port": 9090},
                                                   {"protocol": "TCP", "port": 9091}])"));
    if (!prometheus_ns.empty()) {
      EXPECT_EQ(ingress[2]["from"][0]["namespaceSelector"]["matchLabels"]
                       ["kubernetes.io/metadata.name"],
                prometheus_ns);
      EXPECT_EQ(ingress[2]["ports"].size(), 3u);
    }
    // The namespace selector's label is one the API server gives the
    // operator's namespace.
    EXPECT_EQ(Get(kNamespaces, "", operator_ns)["metadata"]["labels"]
                 ["kubernetes.io/metadata.name"],
              operator_ns);
    EXPECT_EQ(policy["metadata"]["ownerReferences"][0]["uid"],
              Get(kube::kTrainingJobs, ns, job)["metadata"]["uid"]);
    std::string output;
    ASSERT_OK(cluster_->Kubectl({"get", "networkpolicy", "--namespace", ns}, &output));
    EXPECT_NE(output.find(job + "-ingress"), std::string::npos) << output;
    EXPECT_NE(output.find("gaptrain.io/job-name=" + job), std::string::npos) << output;
  }

  // A job's life, with the test as the kubelet: created, a worker
  // preempted and replaced, scaled up, suspended and resumed, a genuine
  // failure past backoffLimit 0 fails the job, and ttlSecondsAfterFinished
  // 0 deletes it. Nothing the operator asked was refused. The operator runs
  // as in its Deployment: $POD_NAMESPACE/$POD_NAME name its own pod, and
  // without --image its job pods get the image of that pod's container.
  void LiveAJobsLife(const std::string& ns) {
    CreateNamespace(ns);
    const std::string own_pod = CreateOperatorPod(kOwnImage);
    Cleanup remove_own_pod{[&] {
      admin()->Delete(kube::kPods, kOperatorNamespace, own_pod, kube::DeleteOptions()).ok();
    }};
    std::unique_ptr<RunningOperator> op =
        StartOperator("op", kFastElection, "", InCluster(own_pod));
    ASSERT_NE(op, nullptr);
    CreateJob(Job(ns, "mnist",
                  {{"runPolicy", {{"backoffLimit", 0}, {"ttlSecondsAfterFinished", 0}}}}));
    ASSERT_TRUE(Eventually([&] { return Pods(ns, "mnist").size() == 5; }, seconds(30)))
        << op->Log();
    for (const json& pod : Pods(ns, "mnist")) {
      for (const json& c : pod["spec"]["containers"]) {
        EXPECT_EQ(c["image"], kOwnImage) << pod["metadata"]["name"];
      }
    }
    EXPECT_NE(op->Log().find(std::string("job pods' image, where their template names none: ") +
                             kOwnImage + " (container \"operator\" of pod " +
                             kOperatorNamespace + "/" + own_pod + ")"),
              std::string::npos)
        << op->Log();
    ASSERT_NO_FATAL_FAILURE(ExpectJobNetworkPolicy(ns, "mnist", kOperatorNamespace));
    // The token, created with the pods; the operator reads no Secret, and
    // creating it again with each pod it recreates keeps it.
    const json token = Get(kube::kSecrets, ns, "mnist-token")["data"]["token"];
    ASSERT_TRUE(token.is_string());
    RunAllPods(ns, "mnist");
    ASSERT_TRUE(WaitForJob(ns, "mnist", [](const json& j) { return Phase(j) == "Running"; }))
        << Get(kube::kTrainingJobs, ns, "mnist").dump(2) << op->Log();

    // A spot reclaim: DisruptionTarget on trainer 0, which then fails.
    const std::string old_uid = Get(kube::kPods, ns, "mnist-trainer-0")["metadata"]["uid"];
    WriteStatus(ns, "mnist-trainer-0", [](json* status) {
      (*status)["conditions"].push_back({{"type", "DisruptionTarget"},
                                         {"status", "True"},
                                         {"reason", "TerminationByKubelet"},
                                         {"message", "Pod was terminated in response to "
                                                     "imminent node shutdown."}});
    });
    ASSERT_TRUE(WaitForJob(ns, "mnist", [](const json& j) {
      return j["status"].value("preemptions", 0) == 1;
    })) << op->Log();
    ASSERT_TRUE(Eventually([&] {
      const json replacement = Get(kube::kPods, ns, "mnist-trainer-0");
      return replacement.is_object() && replacement["metadata"]["uid"] != old_uid;
    })) << op->Log();
    RunAllPods(ns, "mnist");

    // kubectl scale: a third trainer.
    Status s = cluster_->Kubectl({"scale", "trainingjob/mnist", "--namespace", ns,
                                  "--replicas=3"});
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_TRUE(Eventually([&] { return Get(kube::kPods, ns, "mnist-trainer-2").is_object(); }))
        << op->Log();
    RunAllPods(ns, "mnist");

    // Suspended: every pod goes. Resumed: they come back.
    s = admin()->MergePatch(kube::kTrainingJobs, ns, "mnist",
                            {{"spec", {{"runPolicy", {{"suspend", true}}}}}}, nullptr);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_TRUE(Eventually([&] { return Pods(ns, "mnist").empty(); })) << op->Log();
    s = admin()->MergePatch(kube::kTrainingJobs, ns, "mnist",
                            {{"spec", {{"runPolicy", {{"suspend", false}}}}}}, nullptr);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_TRUE(Eventually([&] { return Pods(ns, "mnist").size() == 6; })) << op->Log();
    RunAllPods(ns, "mnist");
    EXPECT_EQ(Get(kube::kSecrets, ns, "mnist-token")["data"]["token"], token);

    // A genuine failure of trainer 1: past backoffLimit 0, the job fails
    // and, with ttlSecondsAfterFinished 0, is deleted with its children.
    WriteStatus(ns, "mnist-trainer-1", [](json* status) {
      (*status)["phase"] = "Failed";
      (*status)["containerStatuses"][0]["ready"] = false;
      (*status)["containerStatuses"][0]["state"] = {
          {"terminated", {{"exitCode", 1}, {"reason", "Error"}}}};
    });
    ASSERT_TRUE(Eventually([&] { return Get(kube::kTrainingJobs, ns, "mnist").is_null(); },
                           seconds(30)))
        << op->Log();
    EXPECT_TRUE(Eventually([&] { return Pods(ns, "mnist").empty(); }, seconds(30)));
    // The garbage collector deletes what the job owned, its policy and token.
    EXPECT_TRUE(Eventually(
        [&] {
          return Get(kube::kNetworkPolicies, ns, "mnist-ingress").is_null() &&
                 Get(kube::kSecrets, ns, "mnist-token").is_null();
        },
        seconds(30)));
    const std::vector<std::string> reasons = EventReasons(ns);
    for (const char* reason : {"TrainingJobCreated", "TrainingJobRunning", "WorkerPreempted",
                               "WorkerFailed", "BackoffLimitExceeded", "TrainingJobDeleted"}) {
      EXPECT_NE(std::find(reasons.begin(), reasons.end(), reason), reasons.end()) << reason;
    }
    EXPECT_TRUE(Eventually([&] {
      return op->Metric("gaptrain_operator_jobs_failed_total{reason=\"BackoffLimitExceeded\"}") ==
             1;
    }));
    const MetricsSample m = op->Metrics();
    EXPECT_EQ(MetricValue(m, "gaptrain_operator_jobs_created_total"), 1);
    EXPECT_EQ(MetricValue(m, "gaptrain_operator_preemptions_total"), 1);
    EXPECT_EQ(MetricValue(m, "gaptrain_operator_worker_failures_total"), 1);

    // Not one request of the operator was refused, and it says so.
    const std::string log = op->Log();
    EXPECT_EQ(log.find("403 Forbidden"), std::string::npos) << log;  // not a timestamp's .403
    EXPECT_EQ(log.find("Forbidden"), std::string::npos) << log;
    // Nor did the API server warn of anything it sent (a deprecated API or
    // field, a value it ignores).
    EXPECT_EQ(log.find(kApiServerWarningLog), std::string::npos) << log;
    for (const AuditRecord& r : OperatorRequests()) {
      EXPECT_NE(r.code, 403) << r.verb << " " << r.uri;
    }
  }

  static Status rbac_installed_;
  envtest::ControlPlane* cluster_ = nullptr;
  std::string dir_;
  std::string lease_name_;
  int runs_ = 0;
  int next_ip_ = 10;
};

Status OperatorProcessTest::rbac_installed_;

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

// An operator whose ServiceAccount is bound to nothing is alive but not
// ready, and names what it cannot read; bound to the shipped ClusterRole,
// it becomes ready and leads.
TEST_F(OperatorProcessTest, HealthReadinessAndMetricsOverHttp) {
  ASSERT_TRUE(admin()
                  ->Create(kServiceAccounts, kOperatorNamespace,
                           {{"apiVersion", "v1"},
                            {"kind", "ServiceAccount"},
                            {"metadata", {{"name", "unbound"}}}},
                           nullptr)
                  .ok());
  std::string token;
  ASSERT_TRUE(cluster_->ServiceAccountToken(kOperatorNamespace, "unbound", &token).ok());
  std::unique_ptr<RunningOperator> op =
      StartOperator("op", kFastElection, cluster_->Kubeconfig(token, kOperatorNamespace));
  ASSERT_NE(op, nullptr);
  HttpClientResponse r;
  ASSERT_TRUE(op->GetHealth("/healthz", &r).ok());
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok");
  EXPECT_TRUE(Eventually([&] {
    return op->GetHealth("/readyz", &r).ok() && r.status == 503 &&
           r.body.find("trainingjobs") != std::string::npos;
  })) << r.body;
  EXPECT_EQ(r.body.rfind("informers not synced: ", 0), 0u) << r.body;
  EXPECT_EQ(op->Metric("gaptrain_operator_is_leader", -1), 0) << "no leader before the caches";
  EXPECT_TRUE(op->process()->Running());

  ASSERT_TRUE(admin()
                  ->Create(kClusterRoleBindings, "",
                           {{"apiVersion", "rbac.authorization.k8s.io/v1"},
                            {"kind", "ClusterRoleBinding"},
                            {"metadata", {{"name", "unbound-operator"}}},
                            {"roleRef",
                             {{"apiGroup", "rbac.authorization.k8s.io"},
                              {"kind", "ClusterRole"},
                              {"name", "gaptrain-operator"}}},
                            {"subjects",
                             {{{"kind", "ServiceAccount"},
                               {"name", "unbound"},
                               {"namespace", kOperatorNamespace}}}}},
                           nullptr)
                  .ok());
  EXPECT_TRUE(Eventually(
      [&] { return op->GetHealth("/readyz", &r).ok() && r.status == 200; }, seconds(60)))
      << r.body << op->Log();
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
  admin()->Delete(kClusterRoleBindings, "", "unbound-operator", kube::DeleteOptions()).ok();
}

// The shipped ClusterRole (deploy/rbac) is enough for a job's whole life
// under OwnerReferencesPermissionEnforcement, and the audit log shows the
// operator used exactly the permissions it declares: every request within
// OperatorPermissions(), and every declared permission used, but "create"
// on what it applies (a server-side apply that creates is logged as
// "patch", and authorized as both) and what admission checks for it
// (OperatorAdmissionPermissions(): `update` on trainingjobs/finalizers,
// which no request uses; without it every child's create is refused).
TEST_F(OperatorProcessTest, AJobsLifeNeedsExactlyTheShippedPermissions) {
  LiveAJobsLife("team-a");

  const std::vector<kube::RbacPermission> allowed = OperatorPermissions();
  std::set<kube::RbacPermission> used;
  const std::vector<std::string> discovery = OperatorDiscoveryPaths();
  for (const AuditRecord& r : OperatorRequests()) {
    if (r.resource.empty()) {  // discovery, which every authenticated user may read
      EXPECT_NE(std::find(discovery.begin(), discovery.end(), r.uri), discovery.end()) << r.uri;
      EXPECT_EQ(r.verb, "get") << r.uri;
      continue;
    }
    const kube::RbacPermission p = RequestPermission(r.group, r.resource, r.subresource, r.verb);
    EXPECT_TRUE(std::binary_search(allowed.begin(), allowed.end(), p))
        << r.verb << " " << r.uri << " needs " << p.group << "/" << p.resource << " " << p.verb;
    used.insert(p);
  }
  std::set<kube::RbacPermission> created_by_apply;
  for (const kube::Resource& r : {kube::kPods, kube::kServices, kube::kConfigMaps,
                                  kube::kPersistentVolumeClaims, kube::kNetworkPolicies}) {
    created_by_apply.insert({std::string(r.group), r.RbacName(), "create"});
  }
  for (const kube::RbacPermission& p : OperatorAdmissionPermissions()) {
    EXPECT_EQ(used.count(p), 0u) << p.resource << " " << p.verb << " was a request";
    created_by_apply.insert(p);
  }
  // Gap-aware autoscaling's scale needs a master's Gap, which this job's
  // life has not (no master runs): AnAutoscaledJobGrowsAndShrinksThrough...
  // checks that request is made and allowed.
  const kube::RbacPermission autoscaler_scale{"gaptrain.io", "trainingjobs/scale", "patch"};
  EXPECT_TRUE(std::binary_search(allowed.begin(), allowed.end(), autoscaler_scale));
  for (const kube::RbacPermission& p : allowed) {
    if (created_by_apply.count(p) > 0 || p == autoscaler_scale) continue;
    // Kueue's (and the PriorityClasses a Workload's priority may come
    // from) are used with --kueue only, which this operator runs without
    // (no Kueue here): KueueAdmitsJobsByQuotaFlavorAndPriority
    // (operator_e2e_test) checks they are used.
    if (p.group == "kueue.x-k8s.io" || p.group == "scheduling.k8s.io") continue;
    EXPECT_EQ(used.count(p), 1u) << "declared but never used: " << p.group << "/" << p.resource
                                 << " " << p.verb;
  }
  // Secrets: it created the token and read none; RBAC lets it create
  // Secrets and nothing else, in no namespace.
  EXPECT_EQ(used.count({"", "secrets", "create"}), 1u);
  for (const char* verb : {"get", "list", "watch", "update", "patch", "delete"}) {
    std::string output;
    const Status s = cluster_->Kubectl(
        {"auth", "can-i", verb, "secrets", "--all-namespaces", "--as", kOperatorUser}, &output);
    EXPECT_FALSE(s.ok()) << verb << " secrets: " << output;
    EXPECT_NE(output.find("no"), std::string::npos) << verb << " secrets: " << output;
  }
  std::string output;
  EXPECT_OK(cluster_->Kubectl(
      {"auth", "can-i", "create", "secrets", "--namespace", "team-a", "--as", kOperatorUser},
      &output));
  EXPECT_NE(output.find("yes"), std::string::npos) << output;
}

// The chart's RBAC, as `helm template` renders it, is enough too.
TEST_F(OperatorProcessTest, AJobsLifeWithTheChartsRbac) {
  // deploy/'s RBAC back for the later tests, also when this one fails.
  Cleanup reinstall{[&] {
    const Status s = InstallOperatorRbac(cluster_, RbacSource::kDeploy);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }};
  Status s = InstallOperatorRbac(cluster_, RbacSource::kChart);
  if (s.code() == Status::Code::kNotFound) GAPTRAIN_SKIP_OR_FAIL_IN_CI(s.message());
  ASSERT_TRUE(s.ok()) << s.ToString();
  LiveAJobsLife("team-chart");
}

// --network-policy=false: jobs get no NetworkPolicy. An operator started
// later with the default (and Prometheus' namespace) gives the same running
// job its policy, the scrape rule among its rules.
TEST_F(OperatorProcessTest, NetworkPoliciesFollowTheOperatorsFlags) {
  const std::string ns = "policies";
  CreateNamespace(ns);
  CreateNamespace("monitoring");
  {
    std::unique_ptr<RunningOperator> op =
        StartOperator("op", {"--leader-elect=false", "--network-policy=false"});
    ASSERT_NE(op, nullptr);
    CreateJob(Job(ns, "open"));
    ASSERT_TRUE(Eventually([&] { return Pods(ns, "open").size() == 5; })) << op->Log();
    kube::ObjectList policies;
    ASSERT_OK(admin()->List(kube::kNetworkPolicies, ns, kube::ListOptions(), &policies));
    EXPECT_EQ(policies.items.size(), 0u);
  }
  std::unique_ptr<RunningOperator> op = StartOperator(
      "op2", {"--leader-elect=false", "--network-policy-prometheus-namespace=monitoring"});
  ASSERT_NE(op, nullptr);
  ASSERT_NO_FATAL_FAILURE(ExpectJobNetworkPolicy(ns, "open", kOperatorNamespace, "monitoring"));
  EXPECT_EQ(op->Log().find("Forbidden"), std::string::npos) << op->Log();
}

// Bad input never crashes the operator: a template the API would refuse
// fails its job with FailedValidation and the field's name (refused writes:
// AQuotaRefusalIsAFailedCreateWarning...). A spec the parser refuses does
// not get this far: the CRD's rules refuse it at create, in the parser's
// words (operator/crd).
TEST_F(OperatorProcessTest, BadJobsFailValidation) {
  CreateNamespace("bad-jobs");
  std::unique_ptr<RunningOperator> op = StartOperator("op", {"--leader-elect=false"});
  ASSERT_NE(op, nullptr);
  const json too_few =
      Job("bad-jobs", "too-few", {{"workers", {{"replicas", 2}, {"minReplicas", 3}}}});
  const Status refused = admin()->Create(kube::kTrainingJobs, "bad-jobs", too_few, nullptr);
  EXPECT_NE(refused.message().find("spec.workers.minReplicas: must be <= replicas"),
            std::string::npos)
      << refused.ToString();
  CreateJob(Job("bad-jobs", "bad-template",
                {{"master", {{"template", {{"spec", {{"containers", "x"}}}}}}}}));
  for (const char* name : {"bad-template"}) {
    ASSERT_TRUE(WaitForJob("bad-jobs", name, [](const json& j) { return Phase(j) == "Failed"; }))
        << name << "\n" << op->Log();
    const json job = Get(kube::kTrainingJobs, "bad-jobs", name);
    bool found = false;
    for (const json& c : job["status"]["conditions"]) {
      if (c["type"] != "Failed") continue;
      found = true;
      EXPECT_EQ(c["reason"], "FailedValidation");
      EXPECT_NE(c["message"].get<std::string>().find("spec.master.template"), std::string::npos)
          << c.dump();
    }
    EXPECT_TRUE(found) << job.dump(2);
    EXPECT_TRUE(Pods("bad-jobs", name).empty()) << "nothing is created for a job that failed";
  }
}

// A write the API refuses (an exhausted ResourceQuota) is reported (the
// job's condition ReplicaFailure and one Warning FailedCreate, with the
// quota's message, as a ReplicaSet reports it), retried with backoff and
// counted; once the quota goes, the pods are created and the condition
// clears.
TEST_F(OperatorProcessTest, AQuotaRefusalIsAFailedCreateWarningRetriedWithBackoff) {
  CreateNamespace("quota");
  std::unique_ptr<RunningOperator> op = StartOperator("op", {"--leader-elect=false"});
  ASSERT_NE(op, nullptr);
  // No pod may be created in the namespace: the operator's applies are
  // refused until the quota goes.
  ASSERT_TRUE(admin()
                  ->Create(kResourceQuotas, "quota",
                           {{"apiVersion", "v1"},
                            {"kind", "ResourceQuota"},
                            {"metadata", {{"name", "no-pods"}}},
                            {"spec", {{"hard", {{"pods", "0"}}}}}},
                           nullptr)
                  .ok());
  CreateJob(Job("quota", "good"));
  EXPECT_TRUE(Eventually([&] {
    return op->Log().find("job=quota/good reconcile failed (Forbidden), retrying") !=
           std::string::npos;
  })) << op->Log();
  EXPECT_GE(op->Metric("gaptrain_operator_reconcile_errors_total{reason=\"Forbidden\"}"), 1);
  // The job says so itself, as a ReplicaSet would: condition ReplicaFailure
  // and a Warning FailedCreate, with the quota's own message.
  ASSERT_TRUE(WaitForJob("quota", "good", [](const json& j) {
    return ConditionOf(j, "ReplicaFailure").value("status", "") == "True";
  })) << op->Log();
  const json failure = ConditionOf(Get(kube::kTrainingJobs, "quota", "good"), "ReplicaFailure");
  EXPECT_EQ(failure["reason"], "FailedCreate");
  EXPECT_NE(failure["message"].get<std::string>().find("exceeded quota: no-pods"),
            std::string::npos)
      << failure.dump();
  EXPECT_TRUE(Eventually([&] { return CountEvents("quota", "good", "FailedCreate") == 1; }));
  ASSERT_TRUE(admin()->Delete(kResourceQuotas, "quota", "no-pods", kube::DeleteOptions()).ok());
  EXPECT_TRUE(Eventually([&] { return Pods("quota", "good").size() == 5; }, seconds(60)))
      << op->Log();
  EXPECT_TRUE(WaitForJob("quota", "good", [](const json& j) {
    return ConditionOf(j, "ReplicaFailure").value("reason", "") == "ChildrenAccepted";
  })) << Get(kube::kTrainingJobs, "quota", "good").dump(2);
  EXPECT_TRUE(op->process()->Running());
  HttpClientResponse r;
  ASSERT_TRUE(op->GetHealth("/healthz", &r).ok());
  EXPECT_EQ(r.status, 200);
}

// Two replicas: only the leader reconciles; SIGKILL of the leader hands
// over within the lease duration.
TEST_F(OperatorProcessTest, OnlyTheLeaderReconcilesAndAStandbyTakesOverAfterSigkill) {
  CreateNamespace("leaders");
  std::unique_ptr<RunningOperator> a = StartOperator("op-a");
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(Eventually([&] { return a->Metric("gaptrain_operator_is_leader") == 1; }))
      << a->Log();
  std::unique_ptr<RunningOperator> b = StartOperator("op-b");
  ASSERT_NE(b, nullptr);
  HttpClientResponse r;
  ASSERT_TRUE(Eventually([&] { return b->GetHealth("/readyz", &r).ok() && r.status == 200; }))
      << "a standby is ready too";

  CreateJob(Job("leaders", "first"));
  ASSERT_TRUE(Eventually([&] { return Pods("leaders", "first").size() == 5; })) << a->Log();
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
  CreateJob(Job("leaders", "second"));
  EXPECT_TRUE(Eventually([&] { return Pods("leaders", "second").size() == 5; })) << b->Log();
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
  const json lease = Get(kube::kLeases, kOperatorNamespace, lease_name_);
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
  Status s;
  for (int attempt = 0; attempt < 5; ++attempt) {
    json lease = Get(kube::kLeases, kOperatorNamespace, lease_name_);
    ASSERT_TRUE(lease.is_object());
    lease["spec"]["holderIdentity"] = "usurper";
    lease["spec"]["leaseDurationSeconds"] = 600;
    lease["spec"]["renewTime"] = MicroTimeNow();
    s = admin()->Update(kube::kLeases, kOperatorNamespace, lease, nullptr);
    if (!kube::IsConflict(s)) break;  // the leader renewed in between
  }
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(op->process()->WaitExit(seconds(10))) << op->Log();
  EXPECT_TRUE(WIFEXITED(op->process()->wait_status()) &&
              WEXITSTATUS(op->process()->wait_status()) == 1)
      << DescribeWaitStatus(op->process()->wait_status());
  EXPECT_NE(op->Log().find("leader election lost"), std::string::npos) << op->Log();
}

// Issue 28: a preemptible job under --spot-preset=gke on a cluster whose
// only Node is not a spot node. The real scheduler places each role where
// the job says (issue 39): the master, the coordinator and the evaluator
// (not preemptible) on the on-demand node, and leaves the trainers
// Pending; the job says so itself, with the scheduler's words and how many
// wait, in `kubectl describe tj`; labelling the Node spot places them, and
// the condition clears.
TEST_F(OperatorProcessTest, SpotJobWithoutASpotNodeSaysWhyThenRunsOnceANodeIsLabelled) {
  const std::string ns = "spot";
  CreateNamespace(ns);
  RegisterNode("on-demand-node");
  VolumesForClaimsOf(ns, "spot");
  std::unique_ptr<RunningOperator> op =
      StartOperator("op", {"--leader-elect=false", "--spot-preset", "gke"});
  ASSERT_NE(op, nullptr);
  CreateJob(Job(ns, "spot", {{"workers", {{"replicas", 2}, {"preemptible", true}}}}));

  // The master, the coordinator and the evaluator (no spot requirement)
  // are placed; the two trainers wait for the reason the scheduler gives.
  const std::string waiting =
      "2 pods cannot be scheduled (spot-trainer-0, spot-trainer-1): 0/1 nodes are available: "
      "1 node(s) didn't match Pod's node affinity/selector.";
  ASSERT_TRUE(WaitForJob(
      ns, "spot",
      [&](const json& j) {
        const json c = ConditionOf(j, "PodsUnschedulable");
        return c.value("status", "") == "True" &&
               c.value("message", "").rfind(waiting, 0) == 0;
      },
      seconds(60)))
      << Get(kube::kTrainingJobs, ns, "spot").dump(2) << op->Log();
  for (const char* pod : {"spot-master", "spot-coordinator", "spot-evaluator"}) {
    EXPECT_EQ(Get(kube::kPods, ns, pod)["spec"].value("nodeName", ""), "on-demand-node") << pod;
  }
  const json job = Get(kube::kTrainingJobs, ns, "spot");
  EXPECT_EQ(Phase(job), "Pending");
  EXPECT_EQ(ConditionOf(job, "PodsUnschedulable")["reason"], "Unschedulable");
  EXPECT_TRUE(Eventually([&] {
    for (const json& e : JobEvents(ns, "spot")) {
      if (e.value("reason", "") == "FailedScheduling" && e.value("type", "") == "Warning" &&
          e.value("note", "").find("didn't match Pod's node affinity/selector") !=
              std::string::npos) {
        return true;
      }
    }
    return false;
  })) << op->Log();
  std::string described;
  Status s = cluster_->Kubectl({"describe", "trainingjob", "spot", "--namespace", ns},
                               &described);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::printf("kubectl describe tj spot, waiting:\n%s\n",
              described.substr(std::min(described.size(), described.find("\nStatus:"))).c_str());
  EXPECT_NE(described.find("PodsUnschedulable"), std::string::npos) << described;
  EXPECT_NE(described.find("2 pods cannot be scheduled"), std::string::npos) << described;
  EXPECT_NE(described.find("didn't match Pod's node affinity/selector"), std::string::npos)
      << described;
  EXPECT_NE(described.find("FailedScheduling"), std::string::npos) << described;

  // The Node becomes a spot node: every pod is placed, the condition
  // clears, and once the pods run (the test as their kubelet) so does the job.
  s = admin()->MergePatch(kNodes, "", "on-demand-node",
                          {{"metadata", {{"labels", {{"cloud.google.com/gke-spot", "true"}}}}}},
                          nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(Eventually(
      [&] {
        const std::vector<json> pods = Pods(ns, "spot");
        if (pods.size() != 5) return false;
        for (const json& pod : pods) {
          if (pod["spec"].value("nodeName", "") != "on-demand-node") return false;
        }
        return true;
      },
      seconds(60)))
      << op->Log();
  ASSERT_TRUE(WaitForJob(ns, "spot", [](const json& j) {
    return ConditionOf(j, "PodsUnschedulable").value("status", "") == "False";
  })) << Get(kube::kTrainingJobs, ns, "spot").dump(2);
  EXPECT_EQ(ConditionOf(Get(kube::kTrainingJobs, ns, "spot"), "PodsUnschedulable")["reason"],
            "PodsScheduled");
  RunAllPods(ns, "spot");
  EXPECT_TRUE(WaitForJob(ns, "spot", [](const json& j) { return Phase(j) == "Running"; }))
      << Get(kube::kTrainingJobs, ns, "spot").dump(2) << op->Log();
  EXPECT_EQ(CountEvents(ns, "spot", "FailedCreate"), 0);

  // Later tests' pods must not land on this Node.
  admin()->Delete(kube::kTrainingJobs, ns, "spot", kube::DeleteOptions()).ok();
  admin()->Delete(kNodes, "", "on-demand-node", kube::DeleteOptions()).ok();
}

// Issue 28: in a namespace enforcing PodSecurity "restricted" (hardened
// clusters, OpenShift), the real admission admits every pod the operator
// makes for the example job (examples/k8s/mnist-gap-aware-dana.yaml, as a
// user applies it): no refusal, no FailedCreate.
TEST_F(OperatorProcessTest, RestrictedNamespaceAdmitsTheJobsPods) {
  const std::string ns = "restricted";
  CreateRestrictedNamespace(ns);
  std::unique_ptr<RunningOperator> op = StartOperator("op", {"--leader-elect=false"});
  ASSERT_NE(op, nullptr);
  const std::string name = "mnist-gap-aware-dana";
  Status s = cluster_->Kubectl(
      {"apply", "--namespace", ns, "-f", "examples/k8s/mnist-gap-aware-dana.yaml"});
  ASSERT_TRUE(s.ok()) << s.ToString();
  // The master, the coordinator, the evaluator and 4 trainers.
  ASSERT_TRUE(Eventually([&] { return Pods(ns, name).size() == 7; }, seconds(60)))
      << Get(kube::kTrainingJobs, ns, name).dump(2) << op->Log();
  for (const json& pod : Pods(ns, name)) {
    SCOPED_TRACE(pod["metadata"]["name"].get<std::string>());
    EXPECT_EQ(pod["spec"]["securityContext"]["runAsNonRoot"], true);
    EXPECT_EQ(pod["spec"]["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
    EXPECT_EQ(pod["spec"]["securityContext"]["fsGroup"], 65532);
    for (const json& c : pod["spec"]["containers"]) {
      EXPECT_EQ(c["securityContext"]["allowPrivilegeEscalation"], false);
      EXPECT_EQ(c["securityContext"]["capabilities"]["drop"], json::array({"ALL"}));
    }
  }
  const json job = Get(kube::kTrainingJobs, ns, name);
  EXPECT_TRUE(ConditionOf(job, "ReplicaFailure").empty()) << job.dump(2);
  EXPECT_EQ(CountEvents(ns, name, "FailedCreate"), 0);
  for (const AuditRecord& r : OperatorRequests()) {
    if (r.ns == ns) {
      EXPECT_NE(r.code, 403) << r.verb << " " << r.uri;
    }
  }

  // The dataset loaders of docs/install.md are admitted too (each file in
  // a namespace of its own: they name the same claims).
  s = cluster_->Kubectl({"apply", "--namespace", ns, "-f", "examples/k8s/datasets.yaml"});
  EXPECT_TRUE(s.ok()) << s.ToString();
  CreateRestrictedNamespace("restricted-rwx");
  s = cluster_->Kubectl(
      {"apply", "--namespace", "restricted-rwx", "-f", "examples/k8s/datasets-rwx.yaml"});
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(Get(kube::kPods, ns, "dataset-loader").is_object());
  EXPECT_TRUE(Get(kube::kPods, "restricted-rwx", "dataset-loader").is_object());
}

// OpenShift assigns pods' user and group ids (its SCCs refuse others): an
// API server that serves security.openshift.io (here through a CRD of
// that group, which is what discovery shows on OpenShift) makes the
// operator's default --pod-ids=auto leave them out, and the pods are
// still admitted where PodSecurity "restricted" is enforced. Without the
// group (RestrictedNamespaceAdmitsTheJobsPods) they name 65532.
TEST_F(OperatorProcessTest, WhereTheClusterAssignsIdsJobPodsNameNone) {
  const std::string crd = dir_ + "/scc-crd.yaml";
  {
    std::ofstream out(crd);
    out << R"(apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: securitycontextconstraints.security.openshift.io}
spec:
  group: security.openshift.io
  scope: Cluster
  names: {plural: securitycontextconstraints, singular: securitycontextconstraints,
          kind: SecurityContextConstraints}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
)";
  }
  Status s = cluster_->Kubectl({"apply", "-f", crd});
  ASSERT_TRUE(s.ok()) << s.ToString();
  // Gone again for the later tests, from discovery too, whose operators
  // would otherwise take this cluster for OpenShift.
  Cleanup remove_crd{[&] {
    cluster_->Kubectl({"delete", "-f", crd, "--wait=true"});
    EXPECT_TRUE(Eventually(
        [&] { return kube::IsNotFound(admin()->GetApiGroup("security.openshift.io", nullptr)); },
        seconds(30)));
  }};
  ASSERT_TRUE(Eventually(
      [&] { return admin()->GetApiGroup("security.openshift.io", nullptr).ok(); }, seconds(30)));

  const std::string ns = "openshift-like";
  CreateRestrictedNamespace(ns);
  std::unique_ptr<RunningOperator> op = StartOperator("op", {"--leader-elect=false"});
  ASSERT_NE(op, nullptr);
  CreateJob(Job(ns, "assigned"));
  ASSERT_TRUE(Eventually([&] { return Pods(ns, "assigned").size() == 5; }, seconds(60)))
      << Get(kube::kTrainingJobs, ns, "assigned").dump(2) << op->Log();
  for (const json& pod : Pods(ns, "assigned")) {
    SCOPED_TRACE(pod["metadata"]["name"].get<std::string>());
    EXPECT_EQ(pod["spec"]["securityContext"],
              json::parse(R"({"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}})"));
    EXPECT_EQ(pod["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"], false);
  }
  EXPECT_NE(op->Log().find("job pods' user and group ids: assigned by the cluster (the API serves "
                           "security.openshift.io (OpenShift): its SCCs assign them)"),
            std::string::npos)
      << op->Log();
}

// Issue 28: a template that asks for what "restricted" forbids (the host's
// network) has its pods refused by the real admission. The job shows the
// API's message as condition ReplicaFailure (FailedCreate) and one Warning
// FailedCreate, retried with backoff, not spun on; fixing the template
// creates the pods and clears the condition.
TEST_F(OperatorProcessTest, AChildRefusedByAdmissionIsAFailedCreateWarning) {
  const std::string ns = "restricted-refused";
  CreateRestrictedNamespace(ns);
  std::unique_ptr<RunningOperator> op = StartOperator("op", {"--leader-elect=false"});
  ASSERT_NE(op, nullptr);
  CreateJob(Job(ns, "rooted", {{"workers", {{"template", {{"spec", {{"hostNetwork", true}}}}}}}}));

  ASSERT_TRUE(WaitForJob(ns, "rooted", [](const json& j) {
    return ConditionOf(j, "ReplicaFailure").value("status", "") == "True";
  })) << op->Log();
  const json failure = ConditionOf(Get(kube::kTrainingJobs, ns, "rooted"), "ReplicaFailure");
  EXPECT_EQ(failure["reason"], "FailedCreate");
  const std::string message = failure["message"];
  EXPECT_EQ(message.rfind("pods \"rooted-trainer-0\" is forbidden: violates PodSecurity "
                          "\"restricted:latest\": host namespaces (hostNetwork=true)",
                          0),
            0u)
      << message;
  ASSERT_TRUE(Eventually([&] { return CountEvents(ns, "rooted", "FailedCreate") == 1; }))
      << op->Log();
  for (const json& e : JobEvents(ns, "rooted")) {
    if (e.value("reason", "") != "FailedCreate") continue;
    EXPECT_EQ(e["type"], "Warning");
    EXPECT_EQ(e["note"], "Error creating: " + message);
  }
  // What the admission admitted is there; the trainers are not.
  EXPECT_TRUE(Get(kube::kPods, ns, "rooted-master").is_object());
  EXPECT_TRUE(Get(kube::kPods, ns, "rooted-evaluator").is_object());
  EXPECT_TRUE(Get(kube::kPods, ns, "rooted-trainer-0").is_null());
  std::string described;
  Status s = cluster_->Kubectl({"describe", "trainingjob", "rooted", "--namespace", ns},
                               &described);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::printf("kubectl describe tj rooted, refused:\n%s\n",
              described.substr(std::min(described.size(), described.find("\nStatus:"))).c_str());
  EXPECT_NE(described.find("FailedCreate"), std::string::npos) << described;
  EXPECT_NE(described.find("violates PodSecurity"), std::string::npos) << described;

  // Retried with backoff: once the trainer's creation has been refused a
  // few more times, the same refusal is still one Event, and the later
  // tries (the API server's own receive times) are spaced out, not spun.
  auto trainer_tries = [&] {
    std::vector<std::chrono::system_clock::time_point> tries;
    for (const AuditRecord& r : OperatorRequests()) {
      if (r.ns == ns && r.resource == "pods" && r.name == "rooted-trainer-0") {
        tries.push_back(r.received);
      }
    }
    return tries;
  };
  ASSERT_TRUE(Eventually([&] { return trainer_tries().size() >= 9; }, seconds(60)))
      << op->Log();
  EXPECT_EQ(CountEvents(ns, "rooted", "FailedCreate"), 1);
  const auto tries = trainer_tries();
  // The 5th to 9th tries wait 80 + 160 + 320 + 640 ms with the queue's
  // backoff (5 ms doubling, no jitter); the first few may be earlier, when
  // the admitted pods' own events queue the job. Received times: a loaded
  // API server may take one try in late, so half of that is the bound.
  const double later_span =
      std::chrono::duration<double>(tries[8] - tries[4]).count();
  EXPECT_GE(later_span, 0.6) << "the creation was retried without backoff";
  std::printf("rooted-trainer-0: tries 5 to 9 over %.2f s\n", later_span);

  // The template fixed: the trainers are admitted, the failure clears.
  s = admin()->MergePatch(kube::kTrainingJobs, ns, "rooted",
                          {{"spec", {{"workers", {{"template", nullptr}}}}}}, nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(Eventually([&] { return Pods(ns, "rooted").size() == 5; }, seconds(60)))
      << op->Log();
  EXPECT_TRUE(WaitForJob(ns, "rooted", [](const json& j) {
    return ConditionOf(j, "ReplicaFailure").value("reason", "") == "ChildrenAccepted";
  })) << Get(kube::kTrainingJobs, ns, "rooted").dump(2);
}

// Issue 28: a job with spec.output that succeeds gets its model exported.
// The test plays the kubelet and the job's services: the coordinator's and
// the master's HTTP endpoints are served from a pod's network namespace
// (its IP, on the real ports, since the operator reads them by pod IP) and
// report the job Succeeded. The operator stops the master (cleanPodPolicy
// Running), then creates NAME-export, which the namespace's PodSecurity
// "restricted" admits, mounting the checkpoints read-only and the output
// claim; once the pod has exited 0, status.output says where the model is,
// with condition and Event ModelExported, and the job stays Succeeded.
TEST_F(OperatorProcessTest, ASucceededJobExportsItsModelToTheOutputClaim) {
  const std::string ns = "exports";
  JobEndpoints endpoints;
  // Succeeded with accuracy 0.9871 (services/coordinator/status_examples.cc).
  ASSERT_NO_FATAL_FAILURE(ServeJobEndpoints(coordinator_status_examples::kSucceeded, &endpoints));
  if (IsSkipped()) return;
  const std::string ip = endpoints.ip;
  std::unique_ptr<HttpServer>& master = endpoints.master;
  master->Handle("/metrics", [](const HttpRequest&) {
    HttpResponse r;
    r.body = "gaptrain_master_model_version 938\n";
    return r;
  });

  CreateRestrictedNamespace(ns);
  std::unique_ptr<RunningOperator> op = StartOperator("op", {"--leader-elect=false"});
  ASSERT_NE(op, nullptr);
  CreateJob(Job(ns, "mnist",
                {{"output", {{"claimName", "models"}, {"path", "mnist/model.pt"}}}}));
  ASSERT_TRUE(Eventually([&] { return Pods(ns, "mnist").size() == 5; }, seconds(30)))
      << Get(kube::kTrainingJobs, ns, "mnist").dump(2) << op->Log();
  // The workers first: once the coordinator runs, the job is Succeeded and
  // the operator deletes what still runs.
  MarkJobRunning(ns, "mnist", ip, "10.0.1.");
  ASSERT_TRUE(WaitForJob(ns, "mnist", [](const json& j) { return Phase(j) == "Succeeded"; }))
      << Get(kube::kTrainingJobs, ns, "mnist").dump(2) << op->Log();

  // The master stops (here: deleted at once, as a pod without a node is);
  // then the export pod, admitted by "restricted".
  json pod;
  ASSERT_TRUE(Eventually([&] {
    pod = Get(kube::kPods, ns, "mnist-export");
    return pod.is_object();
  })) << Get(kube::kTrainingJobs, ns, "mnist").dump(2) << op->Log();
  EXPECT_FALSE(Get(kube::kPods, ns, "mnist-master").is_object());
  const json& c = pod["spec"]["containers"][0];
  EXPECT_EQ(c["command"],
            json({"gaptrain", "export", "--checkpoint-dir", "/var/lib/gaptrain/checkpoints", "-o",
                  "/var/lib/gaptrain/output/mnist/model.pt", "--mkdir", "--card",
                  "/var/lib/gaptrain/output/mnist/model.pt.json", "--job",
                  "/etc/gaptrain/job.yaml", "--test-accuracy", "0.9871"}));
  std::map<std::string, json> claims;
  for (const json& v : pod["spec"]["volumes"]) {
    if (v.contains("persistentVolumeClaim")) claims[v["name"]] = v["persistentVolumeClaim"];
  }
  EXPECT_EQ(claims["gaptrain-checkpoints"],
            json::parse(R"j({"claimName": "mnist-checkpoints", "readOnly": true})j"));
  EXPECT_EQ(claims["gaptrain-output"], json::parse(R"j({"claimName": "models"})j"));
  EXPECT_EQ(pod["spec"]["restartPolicy"], "Never");
  EXPECT_EQ(pod["spec"]["securityContext"]["runAsNonRoot"], true);
  EXPECT_EQ(pod["metadata"]["labels"]["gaptrain.io/replica-type"], "export");
  EXPECT_EQ(pod["metadata"]["ownerReferences"][0]["kind"], "TrainingJob");
  // The status says so once the pod exists (written after the create).
  EXPECT_TRUE(WaitForJob(ns, "mnist", [](const json& j) {
    return j["status"].value("output", json::object()).value("phase", "") == "Running";
  })) << Get(kube::kTrainingJobs, ns, "mnist")["status"].dump(2);
  json job = Get(kube::kTrainingJobs, ns, "mnist");
  EXPECT_EQ(ConditionOf(job, "ModelExported")["reason"], "Exporting");

  // It exits 0: the model is there.
  WriteStatus(ns, "mnist-export", [](json* status) {
    (*status)["phase"] = "Succeeded";
    (*status)["containerStatuses"] = {
        {{"name", "gaptrain"},
         {"ready", false},
         {"restartCount", 0},
         {"image", "gaptrain"},
         {"imageID", ""},
         {"state", {{"terminated", {{"exitCode", 0}, {"reason", "Completed"}}}}}}};
  });
  ASSERT_TRUE(WaitForJob(ns, "mnist", [](const json& j) {
    return j["status"].value("output", json::object()).value("phase", "") == "Succeeded";
  })) << Get(kube::kTrainingJobs, ns, "mnist").dump(2) << op->Log();
  job = Get(kube::kTrainingJobs, ns, "mnist");
  EXPECT_EQ(Phase(job), "Succeeded");
  const json& output = job["status"]["output"];
  EXPECT_EQ(output["claimName"], "models");
  EXPECT_EQ(output["path"], "mnist/model.pt");
  EXPECT_EQ(output["message"],
            "the model is in claim models at mnist/model.pt (model card mnist/model.pt.json)");
  EXPECT_TRUE(output.contains("completionTime"));
  EXPECT_EQ(ConditionOf(job, "ModelExported")["status"], "True");
  EXPECT_TRUE(Eventually([&] { return CountEvents(ns, "mnist", "ModelExported") == 1; }))
      << op->Log();
  EXPECT_EQ(CountEvents(ns, "mnist", "FailedCreate"), 0);
  for (const AuditRecord& r : OperatorRequests()) {
    if (r.ns == ns) {
      EXPECT_NE(r.code, 403) << r.verb << " " << r.uri;
    }
  }
  // No TTL: the finished job stays.
  EXPECT_TRUE(Get(kube::kTrainingJobs, ns, "mnist").is_object());
}

// The master's /metrics as the test wants them: a fake. A real master
// cannot be made to give a Gap on demand (its Gap is the model's own), and
// the autoscaler decides on nothing else. It applies `rate` updates per
// second, each push of mean Gap `gap`; its totals grow with the wall clock
// between reads, as a real master's do.
class FakeMasterMetrics {
 public:
  FakeMasterMetrics(double rate, double gap) : rate_(rate), gap_(gap), last_(Clock::now()) {}

  void Set(double rate, double gap) {
    std::lock_guard<std::mutex> lock(mu_);
    Advance();
    rate_ = rate;
    gap_ = gap;
  }

  // The model version now: a later read of /metrics is larger.
  double Version() {
    std::lock_guard<std::mutex> lock(mu_);
    Advance();
    return version_;
  }

  // The Prometheus text, by services/api/master_metric_names.h's names.
  std::string Text() {
    std::lock_guard<std::mutex> lock(mu_);
    Advance();
    char text[512];
    std::snprintf(text, sizeof text, "%s %.3f\n%s %.6f\n%s %.3f\n", master_metric::kModelVersion,
                  version_, master_metric::HistogramSum(master_metric::kGap).c_str(), gap_sum_,
                  master_metric::HistogramCount(master_metric::kGap).c_str(), gap_count_);
    return text;
  }

 private:
  void Advance() {
    const Clock::time_point now = Clock::now();
    const double pushes = rate_ * std::chrono::duration<double>(now - last_).count();
    version_ += pushes;
    gap_sum_ += gap_ * pushes;
    gap_count_ += pushes;
    last_ = now;
  }

  std::mutex mu_;
  double rate_, gap_;
  Clock::time_point last_;
  double version_ = 0, gap_sum_ = 0, gap_count_ = 0;
};

// Issue 31: Gap-aware autoscaling through the scale subresource, on a real
// API server, the test as the kubelet, the coordinator's /status and the
// master's /metrics (a fake the test drives, above) served from a pod
// network namespace. A low Gap and rising updates grow the job 2 -> 4
// through trainingjobs/scale (trainer pods appear, as after `kubectl
// scale`); a trainer preempted during the resize is replaced and the job
// stays Running, the windows that saw it holding; once the growth has
// paid, a Gap above maxGap shrinks it. `kubectl describe tj` shows the
// ScaledUp and ScaledDown Events with the policy's messages and
// status.autoscale; no request of the operator was refused, the scale
// among them.
TEST_F(OperatorProcessTest, AnAutoscaledJobGrowsAndShrinksThroughTheScaleSubresource) {
  const std::string ns = "autoscale";
  JobEndpoints endpoints;
  ASSERT_NO_FATAL_FAILURE(ServeJobEndpoints(coordinator_status_examples::kRunning, &endpoints));
  if (IsSkipped()) return;
  const std::string ip = endpoints.ip;
  std::unique_ptr<HttpServer>& master = endpoints.master;
  // 100 updates/s at Gap 1.1: room under maxGap 1.5 (projected 1.30 at 4).
  FakeMasterMetrics metrics(100, 1.1);
  master->Handle("/metrics", [&metrics](const HttpRequest&) {
    HttpResponse r;
    r.body = metrics.Text();
    return r;
  });

  CreateNamespace(ns);
  std::unique_ptr<RunningOperator> op = StartOperator("op", {"--leader-elect=false"});
  ASSERT_NE(op, nullptr);
  CreateJob(Job(ns, "mnist",
                {{"workers",
                  {{"replicas", 2},
                   {"minReplicas", 1},
                   {"maxReplicas", 8},
                   {"autoscale", {{"enabled", true}, {"maxGap", 1.5}, {"intervalSeconds", 1}}}}}}));
  ASSERT_TRUE(Eventually([&] { return Pods(ns, "mnist").size() == 5; }, seconds(30)))
      << Get(kube::kTrainingJobs, ns, "mnist").dump(2) << op->Log();
  MarkJobRunning(ns, "mnist", ip, "10.0.2.");
  const auto replicas = [](const json& j) { return j["spec"]["workers"].value("replicas", 0); };
  const auto last_decision = [](const json& j) {
    return j.value("status", json::object())
        .value("autoscale", json::object())
        .value("lastDecision", json::object());
  };

  // It grows, through the scale subresource.
  ASSERT_TRUE(WaitForJob(ns, "mnist", [&](const json& j) { return replicas(j) == 4; }))
      << Get(kube::kTrainingJobs, ns, "mnist").dump(2) << op->Log();
  json job = Get(kube::kTrainingJobs, ns, "mnist");
  EXPECT_EQ(Phase(job), "Running");
  EXPECT_EQ(job["metadata"]["generation"], 2);
  // The growth pays from now on: 200 updates/s, and the Gap near maxGap
  // (projected 1.45 at 5), so it grows no further. A window begun after
  // this change is waited for: one that mixed both would judge the growth
  // on a rate in between.
  metrics.Set(200, 1.4);
  const double switched_at = metrics.Version();
  ASSERT_TRUE(WaitForJob(ns, "mnist",
                         [&](const json& j) {
                           const json window = j.value("status", json::object())
                                                   .value("autoscale", json::object())
                                                   .value("window", json::object());
                           return window.value("modelVersion", 0.0) > switched_at;
                         }))
      << Get(kube::kTrainingJobs, ns, "mnist").dump(2) << op->Log();
  ASSERT_TRUE(Eventually([&] {
    return Get(kube::kPods, ns, "mnist-trainer-2").is_object() &&
           Get(kube::kPods, ns, "mnist-trainer-3").is_object();
  })) << op->Log();
  EXPECT_TRUE(Eventually([&] { return CountEvents(ns, "mnist", "TrainingJobScaled") == 1; }));

  // During the resize a spot reclaim takes trainer 0: it is replaced, the
  // job stays Running and holds at 4 (the new trainers not yet running).
  const std::string old_uid = Get(kube::kPods, ns, "mnist-trainer-0")["metadata"]["uid"];
  WriteStatus(ns, "mnist-trainer-0", [](json* status) {
    (*status)["conditions"].push_back({{"type", "DisruptionTarget"},
                                       {"status", "True"},
                                       {"reason", "TerminationByKubelet"},
                                       {"message",
                                        "Pod was terminated in response to "
                                        "imminent node shutdown."}});
  });
  ASSERT_TRUE(WaitForJob(ns, "mnist", [](const json& j) {
    return j["status"].value("preemptions", 0) == 1;
  })) << op->Log();
  ASSERT_TRUE(Eventually([&] {
    const json replacement = Get(kube::kPods, ns, "mnist-trainer-0");
    return replacement.is_object() && replacement["metadata"]["uid"] != old_uid;
  })) << op->Log();
  EXPECT_EQ(Phase(Get(kube::kTrainingJobs, ns, "mnist")), "Running");
  RunAllPods(ns, "mnist");
  // With all four running a window judges the growth (it paid: grownFrom
  // back to 0) and holds near maxGap.
  ASSERT_TRUE(WaitForJob(ns, "mnist",
                         [&](const json& j) {
                           const json last = last_decision(j);
                           return last.value("reason", "") == "Holding" &&
                                  last.value("message", "").find("near maxGap") !=
                                      std::string::npos;
                         }))
      << Get(kube::kTrainingJobs, ns, "mnist").dump(2) << op->Log();
  job = Get(kube::kTrainingJobs, ns, "mnist");
  EXPECT_EQ(Phase(job), "Running");
  EXPECT_EQ(replicas(job), 4);
  EXPECT_EQ(job["status"]["autoscale"]["grownFrom"], 0);
  EXPECT_EQ(last_decision(job)["message"], "Gap 1.40 is near maxGap 1.50: holding at 4 trainers");
  EXPECT_EQ(job["status"]["workers"]["summary"], "4/4");
  EXPECT_EQ(CountEvents(ns, "mnist", "ScaledUp"), 1);  // holds are no Events
  EXPECT_EQ(CountEvents(ns, "mnist", "ScaledDown"), 0);

  // Too stale: it shrinks, and the highest trainers go.
  metrics.Set(200, 1.8);
  ASSERT_TRUE(WaitForJob(ns, "mnist", [&](const json& j) { return replicas(j) < 4; }))
      << Get(kube::kTrainingJobs, ns, "mnist").dump(2) << op->Log();
  EXPECT_TRUE(Eventually([&] { return !Get(kube::kPods, ns, "mnist-trainer-3").is_object(); }))
      << op->Log();
  std::string grew, shrank;
  ASSERT_TRUE(Eventually([&] {
    for (const json& e : JobEvents(ns, "mnist")) {
      if (e.value("type", "") != "Normal") continue;
      const std::string reason = e.value("reason", "");
      if (reason == "ScaledUp" && grew.empty()) grew = e.value("note", "");
      if (reason == "ScaledDown" && shrank.empty()) shrank = e.value("note", "");
    }
    return !grew.empty() && !shrank.empty();
  })) << op->Log();
  EXPECT_EQ(grew.rfind("Gap 1.10 leaves room under maxGap 1.50 (projected 1.30 at 4) at ", 0), 0u)
      << grew;
  EXPECT_NE(grew.find(" updates/s: 2 -> 4 trainers"), std::string::npos) << grew;
  EXPECT_NE(shrank.find(" is above maxGap 1.50 (projected "), std::string::npos) << shrank;
  EXPECT_NE(shrank.find(": 4 -> "), std::string::npos) << shrank;

  // kubectl describe: the decisions as Events, and status.autoscale.
  std::string described;
  const Status s =
      cluster_->Kubectl({"describe", "trainingjob", "mnist", "--namespace", ns}, &described);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::printf("kubectl describe tj mnist, autoscaled:\n%s\n",
              described.substr(std::min(described.size(), described.find("\nStatus:"))).c_str());
  for (const std::string& expected :
       {std::string("ScaledUp"), grew, std::string("ScaledDown"), shrank, std::string("Autoscale:"),
        std::string("Last Decision:"), std::string("Window:")}) {
    EXPECT_NE(described.find(expected), std::string::npos) << expected << "\n" << described;
  }

  // The scale went through trainingjobs/scale, allowed; nothing was refused.
  int scales = 0;
  for (const AuditRecord& r : OperatorRequests()) {
    if (r.ns != ns) continue;
    EXPECT_NE(r.code, 403) << r.verb << " " << r.uri;
    if (r.resource == "trainingjobs" && r.subresource == "scale") {
      EXPECT_EQ(r.verb, "patch") << r.uri;
      scales += r.code == 200;  // or 409, the job changed since: decided again
    }
  }
  EXPECT_GE(scales, 2);
  EXPECT_EQ(CountEvents(ns, "mnist", "FailedCreate"), 0);
}

// Issue 29: without --image, in a cluster, the job pods' image is the
// operator's own; a pod it cannot read stops it at once (exit 1), saying
// why and naming --image, rather than running every job on a guessed
// image. An explicit --image wins, and then no pod is read.
TEST_F(OperatorProcessTest, AnOperatorThatCannotReadItsOwnPodStopsNamingImage) {
  std::string kubeconfig;
  ASSERT_OK(OperatorKubeconfig(cluster_, &kubeconfig));
  const std::string operator_kubeconfig = dir_ + "/operator.kubeconfig";
  WriteRaw(operator_kubeconfig, kubeconfig);
  const std::vector<std::string> args = {"--kubeconfig", operator_kubeconfig, "--metrics-port",
                                         "0", "--health-port", "0"};
  const std::string gone = "gaptrain-operator-gone";

  // 404: $POD_NAME names no pod.
  std::string out;
  int status = RunToExit(args, &out, InCluster(gone));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << DescribeWaitStatus(status) << out;
  for (const std::string& part :
       {std::string("cannot start: "), std::string("job pods' image: --image is not given"),
        "its pod gaptrain-system/" + gone + " ($POD_NAMESPACE/$POD_NAME) cannot be read",
        std::string("404 NotFound"), std::string("pass --image=IMAGE")}) {
    EXPECT_NE(out.find(part), std::string::npos) << part << "\n" << out;
  }

  // 403: a ServiceAccount whose role lacks `get` on pods (here: none).
  ASSERT_OK(admin()->Create(kServiceAccounts, kOperatorNamespace,
                            {{"apiVersion", "v1"},
                             {"kind", "ServiceAccount"},
                             {"metadata", {{"name", "cannot-read-pods"}}}},
                            nullptr));
  std::string token;
  ASSERT_OK(cluster_->ServiceAccountToken(kOperatorNamespace, "cannot-read-pods", &token));
  const std::string refused_kubeconfig = dir_ + "/refused.kubeconfig";
  WriteRaw(refused_kubeconfig, cluster_->Kubeconfig(token, kOperatorNamespace));
  std::vector<std::string> refused_args = args;
  refused_args[1] = refused_kubeconfig;
  const std::string own_pod = CreateOperatorPod(kOwnImage);
  Cleanup remove_own_pod{[&] {
    admin()->Delete(kube::kPods, kOperatorNamespace, own_pod, kube::DeleteOptions()).ok();
  }};
  status = RunToExit(refused_args, &out, InCluster(own_pod));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << DescribeWaitStatus(status) << out;
  for (const std::string& part :
       {std::string("cannot be read"), std::string("403 Forbidden"),
        std::string("must grant get on pods"), std::string("pass --image=IMAGE")}) {
    EXPECT_NE(out.find(part), std::string::npos) << part << "\n" << out;
  }

  // --image wins: the missing pod is not read, and job pods get the flag's image.
  auto gets_of_gone = [&] {
    int n = 0;
    for (const AuditRecord& r : OperatorRequests()) {
      n += r.resource == "pods" && r.verb == "get" && r.name == gone;
    }
    return n;
  };
  const int gets_before = gets_of_gone();
  EXPECT_EQ(gets_before, 1) << "the 404 run read it once";
  const std::string explicit_image = "registry.example.com/gaptrain:explicit";
  std::unique_ptr<RunningOperator> op = StartOperator(
      "op", {"--leader-elect=false", "--image", explicit_image}, "", InCluster(gone));
  ASSERT_NE(op, nullptr);
  const std::string ns = "explicit-image";
  CreateNamespace(ns);
  CreateJob(Job(ns, "mnist"));
  ASSERT_TRUE(Eventually([&] { return Pods(ns, "mnist").size() == 5; }, seconds(30)))
      << op->Log();
  for (const json& pod : Pods(ns, "mnist")) {
    EXPECT_EQ(pod["spec"]["containers"][0]["image"], explicit_image) << pod["metadata"]["name"];
  }
  EXPECT_NE(op->Log().find("job pods' image, where their template names none: " +
                           explicit_image + " (--image)"),
            std::string::npos)
      << op->Log();
  EXPECT_EQ(gets_of_gone(), gets_before);
}

// Issue 29: users' roles. deploy/rbac/aggregated_roles.yaml (installed with
// deploy/rbac) labels gaptrain-edit and gaptrain-view so that the
// controller manager's clusterrole-aggregation controller adds their rules
// to Kubernetes' default roles. A user (a ServiceAccount with its token)
// bound by a RoleBinding to `edit` in a namespace creates, scales and
// deletes TrainingJobs there, and is refused in another; one bound to
// `view` reads them (get, list, watch, the scale and status) and is
// refused every write. Edit cannot set blockOwnerDeletion on a job's
// behalf: the admission plugin this control plane runs checks
// trainingjobs/finalizers, which no user role grants.
TEST_F(OperatorProcessTest, UsersBoundToEditOrViewGetTheAggregatedTrainingJobRules) {
  const std::string ns = "users", elsewhere = "users-elsewhere";
  CreateNamespace(ns);
  CreateNamespace(elsewhere);

  // Aggregated: the default roles grant the rules (the controller fills
  // their rules in when it sees the labelled ClusterRoles).
  auto grants = [&](const std::string& role, const std::string& resource,
                    const std::string& verb) {
    const json r = Get(kClusterRoles, "", role);
    if (!r.is_object()) return false;
    for (const json& rule : r.value("rules", json::array())) {
      auto has = [&](const char* key, const std::string& value) {
        const json list = rule.value(key, json::array());
        return std::find(list.begin(), list.end(), value) != list.end();
      };
      if (has("apiGroups", "gaptrain.io") && has("resources", resource) && has("verbs", verb)) {
        return true;
      }
    }
    return false;
  };
  ASSERT_TRUE(Eventually(
      [&] {
        return grants("edit", "trainingjobs", "create") &&
               grants("edit", "trainingjobs/scale", "patch") &&
               grants("admin", "trainingjobs", "deletecollection") &&
               grants("view", "trainingjobs", "watch") &&
               grants("view", "trainingjobs/scale", "get");
      },
      seconds(60)))
      << Get(kClusterRoles, "", "edit").dump(2);
  EXPECT_FALSE(grants("view", "trainingjobs", "create"));
  EXPECT_FALSE(grants("view", "trainingjobs/scale", "patch"));

  // A user per role: a ServiceAccount bound in `ns` only.
  auto user = [&](const std::string& name, const std::string& role, std::string* token,
                  std::unique_ptr<kube::Client>* client) {
    ASSERT_OK(admin()->Create(kServiceAccounts, ns,
                              {{"apiVersion", "v1"},
                               {"kind", "ServiceAccount"},
                               {"metadata", {{"name", name}}}},
                              nullptr));
    ASSERT_OK(admin()->Create(
        kRoleBindings, ns,
        {{"apiVersion", "rbac.authorization.k8s.io/v1"},
         {"kind", "RoleBinding"},
         {"metadata", {{"name", name + "-" + role}}},
         {"roleRef",
          {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "ClusterRole"}, {"name", role}}},
         {"subjects", {{{"kind", "ServiceAccount"}, {"name", name}, {"namespace", ns}}}}},
        nullptr));
    ASSERT_OK(cluster_->ServiceAccountToken(ns, name, token));
    ASSERT_OK(cluster_->NewClient(*token, client));
    // The binding reaches the authorizer's cache: a read succeeds.
    kube::ObjectList list;
    ASSERT_TRUE(Eventually([&] {
      return (*client)->List(kube::kTrainingJobs, ns, kube::ListOptions(), &list).ok();
    })) << name;
  };
  auto refused = [](const Status& s) { return s.code() == Status::Code::kPermissionDenied; };
  std::string editor_token, viewer_token;
  std::unique_ptr<kube::Client> editor, viewer;
  ASSERT_NO_FATAL_FAILURE(user("editor", "edit", &editor_token, &editor));
  ASSERT_NO_FATAL_FAILURE(user("viewer", "view", &viewer_token, &viewer));

  // edit: create, scale (kubectl scale, and a patch of the scale
  // subresource), delete.
  ASSERT_OK(editor->Create(kube::kTrainingJobs, ns, Job(ns, "mine"), nullptr));
  std::string output;
  ASSERT_OK(cluster_->Kubectl({"--token=" + editor_token, "scale", "trainingjob/mine",
                               "--namespace", ns, "--replicas=3"},
                              &output));
  EXPECT_NE(output.find("scaled"), std::string::npos) << output;
  EXPECT_EQ(Get(kube::kTrainingJobs, ns, "mine")["spec"]["workers"]["replicas"], 3);
  json scale;
  ASSERT_OK(editor->MergePatch(kube::kTrainingJobs.Subresource("scale"), ns, "mine",
                               {{"spec", {{"replicas", 4}}}}, &scale));
  EXPECT_EQ(scale["spec"]["replicas"], 4);
  EXPECT_EQ(Get(kube::kTrainingJobs, ns, "mine")["spec"]["workers"]["replicas"], 4);
  // What only the operator may do: set blockOwnerDeletion on a job's child.
  const std::string uid = Get(kube::kTrainingJobs, ns, "mine")["metadata"]["uid"];
  auto owned = [&](const std::string& name, bool block) {
    return json{{"apiVersion", "v1"},
                {"kind", "ConfigMap"},
                {"metadata",
                 {{"name", name},
                  {"ownerReferences",
                   {{{"apiVersion", "gaptrain.io/v1alpha1"},
                     {"kind", "TrainingJob"},
                     {"name", "mine"},
                     {"uid", uid},
                     {"blockOwnerDeletion", block}}}}}}};
  };
  kube::ApiError error;
  Status s = editor->Create(kube::kConfigMaps, ns, owned("blocking", true), nullptr, &error);
  EXPECT_TRUE(refused(s)) << s.ToString();
  EXPECT_NE(error.message.find("cannot set blockOwnerDeletion if an ownerReference refers to a "
                               "resource you can't set finalizers on"),
            std::string::npos)
      << s.ToString();
  EXPECT_OK(editor->Create(kube::kConfigMaps, ns, owned("not-blocking", false), nullptr));
  ASSERT_OK(editor->Delete(kube::kTrainingJobs, ns, "mine", kube::DeleteOptions()));
  // Refused in a namespace where it is bound to nothing.
  s = editor->Create(kube::kTrainingJobs, elsewhere, Job(elsewhere, "theirs"), nullptr, &error);
  EXPECT_TRUE(refused(s)) << s.ToString();
  EXPECT_EQ(error.http_status, 403);
  kube::ObjectList list;
  EXPECT_TRUE(refused(editor->List(kube::kTrainingJobs, elsewhere, kube::ListOptions(), &list)));

  // view: get, list, watch, the scale and the status; no write.
  CreateJob(Job(ns, "shown"));
  json job;
  EXPECT_OK(viewer->Get(kube::kTrainingJobs, ns, "shown", &job));
  EXPECT_OK(viewer->List(kube::kTrainingJobs, ns, kube::ListOptions(), &list));
  EXPECT_EQ(list.items.size(), 1u);
  kube::WatchOptions watch;
  watch.timeout_seconds = 1;
  std::unique_ptr<kube::WatchStream> stream;
  EXPECT_OK(viewer->Watch(kube::kTrainingJobs, ns, watch, &stream));
  if (stream != nullptr) stream->Cancel();
  EXPECT_OK(viewer->Get(kube::kTrainingJobs.Subresource("scale"), ns, "shown", &scale));
  EXPECT_EQ(scale["spec"]["replicas"], 2);
  EXPECT_OK(viewer->Get(kube::kTrainingJobs.Subresource("status"), ns, "shown", &job));
  EXPECT_TRUE(refused(viewer->Create(kube::kTrainingJobs, ns, Job(ns, "not-mine"), nullptr)));
  EXPECT_TRUE(refused(viewer->MergePatch(kube::kTrainingJobs, ns, "shown",
                                         {{"spec", {{"training", {{"epochs", 2}}}}}}, nullptr)));
  EXPECT_TRUE(refused(viewer->MergePatch(kube::kTrainingJobs.Subresource("scale"), ns, "shown",
                                         {{"spec", {{"replicas", 3}}}}, nullptr)));
  s = cluster_->Kubectl({"--token=" + viewer_token, "scale", "trainingjob/shown", "--namespace",
                         ns, "--replicas=3"},
                        &output);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(output.find("forbidden"), std::string::npos) << output;
  EXPECT_TRUE(refused(viewer->Delete(kube::kTrainingJobs, ns, "shown", kube::DeleteOptions())));
  EXPECT_EQ(Get(kube::kTrainingJobs, ns, "shown")["spec"]["workers"]["replicas"], 2);
}

}  // namespace
}  // namespace gaptrain
