// gaptrain on Kubernetes end to end, on one machine, as a user installs and
// uses it: a real control plane (operator/envtest: kube-apiserver with RBAC,
// kube-controller-manager, kube-scheduler) and a test node (LocalNode) that
// runs every pod's container as a local process in its own network
// namespace. gaptrain is installed from deploy/ (`kubectl apply -k
// deploy/`: the operator runs as the Deployment's two pods, in-cluster, as
// its ServiceAccount with the shipped ClusterRole, one leading), or from
// the Helm chart (`helm install`); in a namespace that enforces
// PodSecurity `restricted`, the datasets' claims
// (examples/k8s/datasets.yaml) are filled as `kubectl cp` would; then
// examples/k8s/mnist-gap-aware-dana.yaml (LeNet-5 on the real MNIST, 4
// spot trainers, as written: each sizes its threads by its CPU request) is
// applied. Once training is under way two trainer pods
// are preempted as a node shutdown does; the job must still reach
// Succeeded with at least 97% test accuracy, status.preemptions 2 and
// failures 0, with the replacements run, Events recorded, no request of
// the operator refused, nothing used outside its declared permissions (the
// audit log), a reconcile that finds nothing to change writing nothing,
// and nothing left behind by the node. Prints the times it measured. A
// third test autoscales the same job (spec.workers.autoscale) through a
// preemption during a resize; a fourth runs examples/python/job-cluster.yaml
// (Python trainers, the user's train.py) through a preemption.
//
// Needs root (network namespaces) and the envtest binaries: skips without
// them, fails instead when CI=true.

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "deploy/monitoring/dashboard_png.h"
#include "deploy/monitoring/grafana_dashboard.h"
#include "deploy/monitoring/panel_data.h"
#include "tests/cluster/cluster_testbed.h"
#include "operator/envtest/control_plane.h"
#include "operator/operator_permissions.h"
#include "operator/operator_process.h"
#include "tests/cluster/test_install.h"
#include "proto/gaptrain.grpc.pb.h"
#include "operator/testing/base64.h"
#include "operator/testing/kueue_manager.h"
#include "operator/testing/local_node.h"
#include "services/net/http_client.h"
#include "services/net/metrics_text.h"
#include "services/testing/missing_requirement.h"
#include "services/testing/plain_pytorch_score.h"
#include "services/testing/prometheus_test_server.h"
#include "services/testing/test_files.h"
#include "services/testing/test_processes.h"
#include "services/testing/testdata_dir.h"
#include "tests/restart_cases.h"
#include "tests/s3_test_server.h"
#include "tests/task_coverage.h"

namespace gaptrain {
namespace {

using envtest::AuditRecord;
using kube_testing::LocalNode;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;
using Install = ClusterTestbed::Install;

constexpr char kNs[] = "research";
constexpr char kJob[] = "mnist-gap-aware-dana";
constexpr char kJobFile[] = "examples/k8s/mnist-gap-aware-dana.yaml";
constexpr char kOperatorSelector[] = "app.kubernetes.io/name=gaptrain-operator";

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Seconds since the epoch, with a fraction (Prometheus's time).
double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

const json& JobStatus(const json& job) {
  static const json empty = json::object();
  return job.is_object() && job.contains("status") ? job["status"] : empty;
}

double Number(const json& object, const std::vector<std::string>& path) {
  const json* at = &object;
  for (const std::string& key : path) {
    if (!at->is_object() || !at->contains(key)) return -1;
    at = &(*at)[key];
  }
  return at->is_number() ? at->get<double>() : -1;
}

// Names in `dir` that start with `prefix`: network namespaces
// (/var/run/netns, where `ip netns` keeps them) or links (/sys/class/net).
std::vector<std::string> EntriesStartingWith(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* entry = readdir(d)) {
    const std::string name = entry->d_name;
    if (name.rfind(prefix, 0) == 0) names.push_back(name);
  }
  closedir(d);
  return names;
}

class OperatorE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TestDir("e2e");
    for (const auto& [command, path] : ClusterTestbed::Binaries()) {
      char resolved[PATH_MAX];
      ASSERT_NE(realpath(path.c_str(), resolved), nullptr) << path;
      binaries_.insert(resolved);
    }
  }

  void TearDown() override {
    if (bed_ != nullptr) bed_->Stop();
  }

  // The cluster with gaptrain installed from `install`; false when the
  // test must stop (skipped or failed).
  bool StartCluster(Install install, bool kueue = false) {
    ClusterTestbed::Options options;
    options.work_dir = dir_;
    options.install = install;
    options.kueue = kueue;
    options.job_namespace = kNs;
    std::string data;
    const Status found = FindSharedDataDir(&data);
    EXPECT_TRUE(found.ok()) << found.ToString();
    if (!found.ok()) return false;
    options.mnist_dir = data + "/mnist";
    options.fashion_mnist_dir = data + "/fashion-mnist";
    const Status s = ClusterTestbed::Start(options, &bed_);
    if (s.code() == Status::Code::kNotFound || s.code() == Status::Code::kPermissionDenied) {
      [&] { GAPTRAIN_SKIP_OR_FAIL_IN_CI(s.message()); }();
      return false;
    }
    EXPECT_TRUE(s.ok()) << s.ToString();
    return s.ok();
  }

  kube::Client* admin() { return bed_->admin(); }
  LocalNode* node() { return bed_->node(); }

  json Get(const kube::Resource& resource, const std::string& ns, const std::string& name) {
    return bed_->Get(resource, ns, name);
  }
  std::vector<json> Pods(const std::string& ns, const std::string& selector) {
    return bed_->Pods(ns, selector);
  }
  json Job() { return Get(kube::kTrainingJobs, kNs, job_); }

  // Waits for the job to satisfy `predicate`; the job as last seen.
  bool WaitJob(const std::function<bool(const json&)>& predicate, milliseconds timeout,
               json* last) {
    return Eventually(
        [&] {
          *last = Job();
          return last->is_object() && predicate(*last);
        },
        timeout);
  }

  // Creates the TrainingJob `job_object` and waits until it is Running:
  // when it was applied, when it ran, and the job as then seen.
  void CreateAndAwaitRunning(const json& job_object, Clock::time_point* applied,
                             Clock::time_point* running, json* job) {
    *applied = Clock::now();
    const Status s = admin()->Create(kube::kTrainingJobs, kNs, job_object, nullptr);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_TRUE(WaitJob([](const json& j) { return JobStatus(j).value("phase", "") == "Running"; },
                        seconds(90), job))
        << Diagnostics();
    *running = Clock::now();
  }

  // examples/shards/job-cluster.yaml as shipped but for what the test node
  // needs (its image's train.py is the checkout's) and for size: 8 shards
  // of 750 PNGs and a test shard of 500, written by make_shards.py into
  // `store`, a real S3 server (rclone serve s3) over a directory of the
  // test's on the node's bridge, which the pods reach with the endpoint
  // and keys of the Secret the job names (envFrom); 2 trainers, `epochs`
  // epochs, the final evaluation only. Call after StartCluster.
  void ShardsInAStoreJob(uint32_t epochs, S3TestServer* store, json* job_object) {
    const std::string readme = AbsolutePath("README.md");
    ASSERT_EQ(readme.front(), '/') << readme;
    const std::string example = readme.substr(0, readme.rfind('/')) + "/examples/shards";
    std::string data;
    ASSERT_TRUE(FindSharedDataDir(&data).ok());
    const std::string root = TestTempDir("operator-shards-s3");
    const std::string bucket = root + "/datasets";
    ASSERT_EQ(::mkdir(bucket.c_str(), 0755), 0);
    std::string made;
    ASSERT_EQ(RunShell("/usr/bin/python3 " + example + "/make_shards.py --data '" + data +
                           "/fashion-mnist' --out '" + bucket +
                           "/fashion-mnist-shards' --shards 8 --train-samples 6000 "
                           "--test-samples 500",
                       &made),
              0)
        << made;
    // On the node's bridge: pods reach it there, as a store outside the cluster.
    Status s = store->Create(root, root + ".s3-server.log", node()->host_ip());
    ASSERT_TRUE(s.ok()) << s.ToString();
    s = store->AwaitAnswer("PYTHONPATH=" + example + ":" + example +
                               "/../../python /usr/bin/python3 -c \"import tar_shards as t; "
                               "print('shards', t.TarShards('s3://datasets/"
                               "fashion-mnist-shards', 'train').num_shards)\"",
                           "shards 8");
    ASSERT_TRUE(s.ok()) << s.ToString();

    job_ = "fashion-mnist-shards";
    s = bed_->ReadJob(example + "/job-cluster.yaml", job_object);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ((*job_object)["metadata"].value("name", ""), job_);
    json& spec = (*job_object)["spec"];
    ASSERT_EQ(spec["data"].value("format", ""), "shards");
    spec["data"]["shards"] = 8;
    spec["data"]["trainSamples"] = 6000;
    spec["training"]["epochs"] = epochs;
    spec["training"]["evalEveryUpdates"] = 100000;  // the final evaluation only
    spec["workers"]["replicas"] = 2;
    spec["workers"]["minReplicas"] = 1;
    // The store's endpoint and keys in the Secret the job names.
    std::vector<std::string> create = {"--namespace", kNs, "create", "secret", "generic",
                                       "fashion-mnist-store"};
    for (const json& variable : store->Env()) {
      create.push_back("--from-literal=" + variable["name"].get<std::string>() + "=" +
                       variable["value"].get<std::string>());
    }
    std::string made_secret;
    s = bed_->cluster()->Kubectl(create, &made_secret);
    ASSERT_TRUE(s.ok()) << s.ToString() << made_secret;
    for (const char* role : {"workers", "evaluator"}) {
      json& container = spec[role]["template"]["spec"]["containers"][0];
      ASSERT_EQ(container["command"], json({"python3", "/app/train.py"})) << role;
      ASSERT_EQ(container["args"], json({"--store", "s3://datasets/fashion-mnist-shards"}))
          << role;
      ASSERT_EQ(container["envFrom"],
                json::parse(R"j([{"secretRef": {"name": "fashion-mnist-store"}}])j"))
          << role;
      container["command"][1] = example + "/train.py";
      container["args"].push_back("--threads");
      container["args"].push_back("1");
    }
  }

  // Whether rclone is there for an S3 server; skips (fails in CI) if not.
  bool RequireS3Server() {
    if (!S3TestServer::Binary().empty()) return true;
    [] {
      GAPTRAIN_SKIP_OR_FAIL_IN_CI(kNoS3Server);
    }();
    return false;
  }

  // The job's condition of `type` now ({} when it has none).
  static json Condition(const json& job, const std::string& type) {
    for (const json& c : JobStatus(job).value("conditions", json::array())) {
      if (c.value("type", "") == type) return c;
    }
    return json::object();
  }

  // Waits until the job's master is at `version`, then preempts
  // JOB-trainer-1 as a node shutdown does and waits for its replacement,
  // ready; the times of the three moments.
  void PreemptOneTrainerAt(double version, Clock::time_point* training,
                           Clock::time_point* preempted, Clock::time_point* replaced) {
    const std::string master = job_ + "-master";
    ASSERT_TRUE(Eventually(
        [&] {
          return MetricValue(bed_->PodMetrics(kNs, master), "gaptrain_master_model_version",
                             0) >= version;
        },
        seconds(120)))
        << Diagnostics();
    *training = Clock::now();
    const std::string victim = job_ + "-trainer-1";
    const json victim_pod = Get(kube::kPods, kNs, victim);
    ASSERT_TRUE(victim_pod.is_object()) << victim;
    const std::string old_uid = victim_pod["metadata"]["uid"];
    const Status s = node()->Preempt(kNs, victim, LocalNode::Disruption::kNodeShutdown);
    ASSERT_TRUE(s.ok()) << s.ToString();
    *preempted = Clock::now();
    ASSERT_NO_FATAL_FAILURE(AwaitReplaced(victim, old_uid));
    *replaced = Clock::now();
  }

  // Waits until pod `name` is a new pod (not `old_uid`) and ready.
  void AwaitReplaced(const std::string& name, const std::string& old_uid) {
    ASSERT_TRUE(Eventually(
        [&] {
          const json pod = Get(kube::kPods, kNs, name);
          return pod.is_object() && pod["metadata"]["uid"] != old_uid && PodReady(pod);
        },
        seconds(90)))
        << name << " was not replaced\n"
        << Diagnostics();
  }

  // Waits for the job to finish; fails unless it Succeeded.
  void AwaitSucceeded(milliseconds timeout, json* job) {
    ASSERT_TRUE(WaitJob(
        [](const json& j) {
          const std::string phase = JobStatus(j).value("phase", "");
          return phase == "Succeeded" || phase == "Failed";
        },
        timeout, job))
        << Diagnostics();
    ASSERT_EQ(JobStatus(*job).value("phase", ""), "Succeeded") << Diagnostics();
  }

  // Waits for the job's spec.output export to end; the job as then seen.
  void AwaitOutput(json* job) {
    ASSERT_TRUE(WaitJob(
        [](const json& j) {
          const std::string phase =
              JobStatus(j).value("output", json::object()).value("phase", "");
          return phase == "Succeeded" || phase == "Failed";
        },
        seconds(120), job))
        << Diagnostics();
  }

  std::string Diagnostics() {
    json job = Job();
    if (job.contains("metadata")) job["metadata"].erase("managedFields");  // noise
    std::string out = "job: " + job.dump(2) + "\noperator pods:";
    for (const json& pod : Pods(kOperatorNamespace, kOperatorSelector)) {
      out += " " + pod["metadata"]["name"].get<std::string>() + " (" +
             pod.value("status", json::object()).value("phase", "") + ")";
    }
    out += "\nlease: " +
           Get(kube::kLeases, kOperatorNamespace, "gaptrain-operator").value("spec", json()).dump();
    out += "\noperator logs (tail):\n";
    const std::string log = bed_->OperatorLogs();
    out += log.size() > 6000 ? log.substr(log.size() - 6000) : log;
    for (const char* suffix : {"coordinator", "master", "evaluator", "trainer-0", "trainer-1"}) {
      const std::string pod = job_ + "-" + suffix;
      std::string text;
      if (node()->Logs(kNs, pod, &text).ok()) {
        out += "\n--- " + pod + " (tail):\n" +
               (text.size() > 2000 ? text.substr(text.size() - 2000) : text);
      }
    }
    return out;
  }

  std::multiset<std::string> EventReasons() {
    kube::ObjectList events;
    EXPECT_TRUE(admin()->List(kube::kEvents, kNs, kube::ListOptions(), &events).ok());
    std::multiset<std::string> reasons;
    for (const json& e : events.items) {
      if (e.value("regarding", json::object()).value("name", "") == job_) {
        reasons.insert(e.value("reason", ""));
      }
    }
    return reasons;
  }

  // The operator's requests, from the API server's audit log.
  std::vector<AuditRecord> OperatorRequests() {
    std::vector<AuditRecord> records;
    const Status s = gaptrain::OperatorRequests(*bed_->cluster(), &records);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return records;
  }

  // Not one request of the operator refused (audit log and its logs),
  // nothing outside the declared permissions.
  void ExpectOperatorWithinItsPermissions() {
    const std::vector<kube::RbacPermission> allowed = OperatorPermissions();
    const std::vector<std::string> discovery = OperatorDiscoveryPaths();
    size_t requests = 0;
    for (const AuditRecord& r : OperatorRequests()) {
      ++requests;
      EXPECT_NE(r.code, 403) << r.verb << " " << r.uri;
      if (r.resource.empty()) {  // discovery, which every authenticated user may read
        EXPECT_NE(std::find(discovery.begin(), discovery.end(), r.uri), discovery.end()) << r.uri;
        continue;
      }
      const kube::RbacPermission p = RequestPermission(r.group, r.resource, r.subresource, r.verb);
      EXPECT_TRUE(std::binary_search(allowed.begin(), allowed.end(), p)) << r.verb << " " << r.uri;
    }
    EXPECT_GT(requests, 0u) << "the audit log shows no request of " << kOperatorUser;
    const std::string logs = bed_->OperatorLogs();
    EXPECT_EQ(logs.find("Forbidden"), std::string::npos) << logs;
    EXPECT_EQ(logs.find(kApiServerWarningLog), std::string::npos) << logs;
  }

  // Writes the operator sent, its Lease's aside; `detail` lists them.
  size_t JobWrites(std::string* detail = nullptr) {
    size_t writes = 0;
    for (const AuditRecord& r : OperatorRequests()) {
      if (r.resource == "leases" || r.verb == "get" || r.verb == "list" || r.verb == "watch") {
        continue;
      }
      ++writes;
      if (detail != nullptr) *detail += "\n  " + r.verb + " " + r.uri + " -> " + std::to_string(r.code);
    }
    return writes;
  }

  void TrainThroughTwoPreemptions(Install install);

  // The job's gRPC is TLS by default: status.tls, and its master, asked by
  // pod IP as any client in the cluster could, refuses a plaintext
  // connection and answers one that trusts the job's certificate (Secret
  // NAME-tls) and names its Service; its coordinator's /status answers
  // only with the job's status token.
  void ExpectJobTrafficLockedDown(const json& job) {
    EXPECT_TRUE(JobStatus(job).value("tls", false)) << JobStatus(job).dump(2);
    const std::string name = job["metadata"].value("name", "");
    const json master = Get(kube::kPods, kNs, name + "-master");
    const std::string address = PodIp(master) + ":7070";
    ASSERT_NE(address, ":7070") << master.dump(2);
    const json secret = Get(kube::kSecrets, kNs, name + "-tls");
    std::string ca;
    long bad = -1;
    ASSERT_TRUE(kube_testing::Base64Decode(
        secret.value("data", json::object()).value("ca.crt", ""), &ca, &bad))
        << secret.dump(2);
    auto describe = [](const std::shared_ptr<grpc::Channel>& channel) {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + seconds(10));
      proto::DescribeRequest request;
      proto::DescribeResponse response;
      return proto::Master::NewStub(channel)->Describe(&context, request, &response);
    };
    const grpc::Status plain =
        describe(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
    EXPECT_EQ(plain.error_code(), grpc::StatusCode::UNAVAILABLE) << plain.error_message();
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = ca;
    grpc::ChannelArguments arguments;
    arguments.SetSslTargetNameOverride(name + "-master." + kNs + ".svc");
    const grpc::Status secure =
        describe(grpc::CreateCustomChannel(address, grpc::SslCredentials(tls), arguments));
    // Past the handshake: answered, or refused for want of the job token.
    EXPECT_TRUE(secure.ok() || secure.error_code() == grpc::StatusCode::UNAUTHENTICATED)
        << secure.error_code() << " " << secure.error_message();

    // The coordinator's /status tells nothing without the job's status
    // token (its annotation), which the operator reads progress with.
    const std::string status_token =
        job["metadata"].value("annotations", json::object()).value("gaptrain.io/status-token", "");
    EXPECT_EQ(status_token.size(), 64u) << job["metadata"].dump(2);
    const std::string coordinator_ip = PodIp(Get(kube::kPods, kNs, name + "-coordinator"));
    HttpClientResponse refused, allowed;
    ASSERT_TRUE(HttpGet(coordinator_ip, 9091, "/status", 10, &refused).ok());
    EXPECT_EQ(refused.status, 401) << refused.body;
    EXPECT_EQ(refused.body.find(name), std::string::npos) << refused.body;
    ASSERT_TRUE(HttpGet(coordinator_ip, 9091, "/status", 10, &allowed, status_token).ok());
    EXPECT_EQ(allowed.status, 200) << allowed.body;
  }

  std::string dir_;
  // The job Job(), Diagnostics() and EventReasons() look at.
  std::string job_ = kJob;
  std::unique_ptr<ClusterTestbed> bed_;
  std::set<std::string> binaries_;
};

void OperatorE2eTest::TrainThroughTwoPreemptions(Install install) {
  const Clock::time_point installing = Clock::now();
  if (!StartCluster(install)) return;
  const Clock::time_point installed = Clock::now();
  const std::vector<json> operators = Pods(kOperatorNamespace, kOperatorSelector);

  // A real Prometheus scrapes both operator pods with the labels a
  // cluster's scrape gives them, for the operator dashboard's picture.
  json targets = json::array();
  for (const json& pod : operators) {
    targets.push_back({{"targets", {PodIp(pod) + ":" + std::to_string(NamedPort(pod, "metrics"))}},
                       {"labels",
                        {{"namespace", kOperatorNamespace},
                         {"pod", pod["metadata"]["name"].get<std::string>()}}}});
  }
  const std::string targets_file = dir_ + "/targets.json";
  std::ofstream(targets_file) << targets.dump();
  PrometheusTestServer::FileTargetsOptions scrape;
  scrape.rule_files = {AbsolutePath("deploy/monitoring/gaptrain-operator.rules.yml")};
  std::unique_ptr<PrometheusTestServer> prometheus;
  const Status scraping =
      PrometheusTestServer::StartWithFileTargets(AbsolutePath(targets_file), scrape, &prometheus);
  ASSERT_TRUE(scraping.ok()) << scraping.ToString();
  const double scraped_from = WallSeconds();

  json job_object;
  Status s = bed_->ReadJob(kJobFile, &job_object);
  ASSERT_TRUE(s.ok()) << s.ToString();
  Clock::time_point applied, running;
  json job;
  ASSERT_NO_FATAL_FAILURE(CreateAndAwaitRunning(job_object, &applied, &running, &job));
  ASSERT_NO_FATAL_FAILURE(ExpectJobTrafficLockedDown(job));

  // Training is under way: every trainer ready, the master updating (read
  // from the master's /metrics, not the operator's slower progress poll).
  ASSERT_TRUE(Eventually(
      [&] {
        const std::vector<json> trainers =
            Pods(kNs, std::string("gaptrain.io/job-name=") + kJob +
                          ",gaptrain.io/replica-type=trainer");
        size_t ready = 0;
        for (const json& pod : trainers) ready += PodReady(pod) ? 1 : 0;
        return ready == 4 && MetricValue(bed_->PodMetrics(kNs, std::string(kJob) + "-master"),
                                         "gaptrain_master_model_version", 0) >= 200;
      },
      seconds(90)))
      << Diagnostics();

  // A node shutdown takes two trainers.
  std::map<std::string, std::string> old_uids;
  for (const char* suffix : {"trainer-1", "trainer-2"}) {
    const std::string name = std::string(kJob) + "-" + suffix;
    const json pod = Get(kube::kPods, kNs, name);
    ASSERT_TRUE(pod.is_object()) << name;
    old_uids[name] = pod["metadata"]["uid"];
    s = node()->Preempt(kNs, name, LocalNode::Disruption::kNodeShutdown);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  const Clock::time_point preempted = Clock::now();
  for (const auto& [name, old_uid] : old_uids) {
    ASSERT_NO_FATAL_FAILURE(AwaitReplaced(name, old_uid));
  }
  const Clock::time_point recovered = Clock::now();

  ASSERT_NO_FATAL_FAILURE(AwaitSucceeded(seconds(480), &job));
  const Clock::time_point succeeded = Clock::now();
  const json& status = JobStatus(job);
  const double accuracy = Number(status, {"progress", "testAccuracy"});
  EXPECT_GE(accuracy, 0.97) << status.dump(2) << Diagnostics();
  EXPECT_EQ(status.value("preemptions", -1), 2) << status.dump(2);
  EXPECT_EQ(status.value("failures", -1), 0) << status.dump(2);
  EXPECT_EQ(status.value("restarts", -1), 0) << status.dump(2);

  // The model came out of the cluster (spec.output): the state_dict in the
  // models' claim scores as well in plain PyTorch.
  json exported;
  ASSERT_NO_FATAL_FAILURE(AwaitOutput(&exported));
  const json output = JobStatus(exported)["output"];
  ASSERT_EQ(output.value("phase", ""), "Succeeded") << output.dump(2) << Diagnostics();
  EXPECT_EQ(output.value("claimName", ""), "models");
  EXPECT_EQ(output.value("path", ""), std::string(kJob) + ".pt");
  std::string claim, data;
  ASSERT_TRUE(node()->ClaimPath(kNs, "models", &claim).ok());
  ASSERT_TRUE(FindSharedDataDir(&data).ok());
  const std::string model = claim + "/" + kJob + ".pt";
  const PlainPytorchScore scored = ScoreStateDict(model, data + "/mnist", "--min-accuracy 0.97");
  EXPECT_EQ(scored.exit_code, 0) << scored.output;
  EXPECT_GE(scored.accuracy, 0.97) << scored.output;
  const json card = json::parse(ReadRaw(model + ".json"), nullptr, false);
  EXPECT_TRUE(card.is_object() && card["job"].value("name", "") == kJob) << card.dump(2);

  // The replacements ran: their logs are the new pods' and they trained.
  for (const auto& [name, old_uid] : old_uids) {
    const std::string log_path = node()->LogPath(kNs, name);
    EXPECT_EQ(log_path.find(old_uid), std::string::npos) << log_path;
    EXPECT_FALSE(ReadRaw(log_path).empty()) << log_path;
  }

  // Events on the job, as `kubectl describe tj` shows them.
  std::multiset<std::string> reasons;
  EXPECT_TRUE(Eventually([&] {
    reasons = EventReasons();
    return reasons.count("TrainingJobSucceeded") == 1;
  }, seconds(10)));
  EXPECT_EQ(reasons.count("WorkerPreempted"), 2u);
  EXPECT_EQ(reasons.count("ModelExported"), 1u);
  for (const char* reason : {"TrainingJobCreated", "TrainingJobRunning", "SuccessfulCreatePod"}) {
    EXPECT_GE(reasons.count(reason), 1u) << reason;
  }
  EXPECT_TRUE(Eventually([&] {
    return MetricValue(bed_->LeaderMetrics(), "gaptrain_operator_jobs_succeeded_total") == 1;
  }, seconds(20))) << Diagnostics();
  EXPECT_EQ(MetricValue(bed_->LeaderMetrics(), "gaptrain_operator_preemptions_total"), 2);

  // Once everything has settled, a reconcile with nothing to change
  // writes nothing: touch a child (an annotation on the master's Service),
  // wait for the reconcile it triggers, count the writes in the audit log
  // (the Lease's renewals aside). Settled means cleanPodPolicy is done: no
  // pod of the job still runs or terminates, and then 2 s without a write.
  ASSERT_TRUE(Eventually(
      [&] {
        for (const json& pod : Pods(kNs, std::string("gaptrain.io/job-name=") + kJob)) {
          const std::string phase = pod.value("status", json::object()).value("phase", "");
          if (pod["metadata"].contains("deletionTimestamp") || phase == "Running" ||
              phase == "Pending") {
            return false;
          }
        }
        return true;
      },
      seconds(60)))
      << Diagnostics();
  auto reconciles = [&] {
    return MetricValue(bed_->LeaderMetrics(), "gaptrain_operator_reconcile_duration_seconds_count", -1);
  };
  bool quiet_touch = false;
  for (int attempt = 0; attempt < 3 && !quiet_touch; ++attempt) {
    size_t writes = 0;
    double reconciled = 0;
    Clock::time_point last_change = Clock::now();
    ASSERT_TRUE(Eventually(
        [&] {
          const size_t w = JobWrites();
          const double r = reconciles();
          if (w != writes || r != reconciled) {
            writes = w;
            reconciled = r;
            last_change = Clock::now();
          }
          return Clock::now() - last_change >= seconds(2);
        },
        seconds(60)))
        << Diagnostics();
    const std::string touch = "touch-" + std::to_string(attempt);
    s = admin()->MergePatch(kube::kServices, kNs, std::string(kJob) + "-master",
                            {{"metadata", {{"annotations", {{"touched", touch}}}}}}, nullptr);
    ASSERT_TRUE(s.ok()) << s.ToString();
    const json status_at_touch = JobStatus(Job());
    ASSERT_TRUE(Eventually([&] { return reconciles() > reconciled; }, seconds(10)));
    const json status_after = JobStatus(Job());
    std::string detail;
    quiet_touch = JobWrites(&detail) == writes;
    EXPECT_TRUE(quiet_touch || status_after != status_at_touch)
        << "a reconcile that changed nothing wrote; the operator's writes:" << detail;
    if (!quiet_touch) {
      std::printf("operator e2e: the status changed under touch %d: %s\n", attempt,
                  json::diff(status_at_touch, status_after).dump().c_str());
    }
  }
  EXPECT_TRUE(quiet_touch) << "every touch met a changing status\n" << Diagnostics();

  ExpectOperatorWithinItsPermissions();
  const std::string logs = bed_->OperatorLogs();
  // The image is named once, in the Deployment's container "operator": each
  // replica read its own pod (in-cluster, POD_NAMESPACE/POD_NAME from the
  // downward API) and gives the job pods that image.
  EXPECT_NE(logs.find("job pods' image, where their template names none: "
                      "ghcr.io/gaptrain/gaptrain:0.1.0 (container \"operator\" of pod " +
                      std::string(kOperatorNamespace) + "/"),
            std::string::npos)
      << logs;

  std::printf(
      "operator e2e (%s): control plane, node and operator pods ready and leading %.1f s after the "
      "start; job Running "
      "%.1f s after apply; 2 trainers preempted at %.1f s, both replaced and ready %.1f s later; "
      "Succeeded %.1f s after apply; accuracy %.2f%% (the exported model in plain PyTorch: "
      "%.2f%%), preemptions %d, failures %d, %zu API writes\n",
      install == Install::kDeploy ? "deploy/" : "chart", Seconds(installed - installing),
      Seconds(running - applied), Seconds(preempted - applied), Seconds(recovered - preempted),
      Seconds(succeeded - applied), 100 * accuracy, 100 * scored.accuracy,
      status.value("preemptions", -1),
      status.value("failures", -1), JobWrites());

  // The operator dashboard over the whole job, for docs/monitoring.md.
  GrafanaDashboard dashboard;
  Status parsed = GrafanaDashboard::Parse(
      ReadRaw("deploy/monitoring/gaptrain-operator.dashboard.json"), &dashboard);
  ASSERT_TRUE(parsed.ok()) << parsed.ToString();
  PanelRange range;
  range.end = WallSeconds();
  range.start = range.end - std::ceil(range.end - scraped_from);
  range.step_seconds = 1;
  range.scrape_interval_seconds = scrape.scrape_interval_seconds;
  const std::vector<TargetData> panels =
      FetchPanelData(prometheus.get(), dashboard, {{"namespace", kOperatorNamespace}}, range);
  EXPECT_TRUE(EmptyTargets(panels).empty()) << ::testing::PrintToString(EmptyTargets(panels));
  if (install == Install::kDeploy) {
    const char* outputs = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
    const std::string png = std::string(outputs != nullptr ? outputs : dir_.c_str()) +
                            "/gaptrain-operator-dashboard.png";
    DashboardPicture picture;
    picture.title = "gaptrain / Operator: one TrainingJob, 4 spot trainers, 2 preempted";
    const Status drawn = RenderDashboardPng(dashboard, panels, range.start, picture, png);
    EXPECT_TRUE(drawn.ok()) << drawn.ToString();
    std::printf("operator dashboard picture: %s\n", png.c_str());
  }

  // The node's end: no process, namespace or link is left.
  const std::string prefix = node()->name_prefix();
  node()->Stop();
  EXPECT_TRUE(Eventually([&] { return ProcessesRunning(binaries_).empty(); }, seconds(10)))
      << ProcessesRunning(binaries_).size() << " gaptrain processes left";
  EXPECT_TRUE(EntriesStartingWith("/var/run/netns", prefix).empty());
  EXPECT_TRUE(EntriesStartingWith("/sys/class/net", prefix).empty());
}

TEST_F(OperatorE2eTest, InstalledFromDeployTrainsThroughTwoPreemptions) {
  TrainThroughTwoPreemptions(Install::kDeploy);
}

TEST_F(OperatorE2eTest, InstalledFromTheChartTrainsThroughTwoPreemptions) {
  TrainThroughTwoPreemptions(Install::kChart);
}

// A master and then a coordinator killed (SIGKILL) mid-run, as a node's
// OOM killer or a crash does: each comes back as a new pod with a new IP
// behind its headless Service, and the job must reach it within seconds of
// it serving (clients re-resolve the name and renew their channels, and
// the node's DNS answers at once), not the 23-33 s that gRPC's default DNS
// re-resolution took. Prints both figures (master 0.43-0.58 s, coordinator
// 0.78-1.81 s measured; the 2 s target is tracked from them in
// docs/performance.md, not asserted: a speed figure of a busy machine). The
// assertion is the behaviour: well under gRPC's 30 s default.
TEST_F(OperatorE2eTest, RestartedMasterAndCoordinatorAreReachedWithinSeconds) {
  if (!StartCluster(Install::kDeploy)) return;
  json job_object;
  Status s = bed_->ReadJob(kJobFile, &job_object);
  ASSERT_TRUE(s.ok()) << s.ToString();
  // Long enough to kill both in turn; a checkpoint soon, which the new
  // master resumes from.
  job_object["spec"]["training"]["epochs"] = 8;
  job_object["spec"]["master"]["checkpoint"]["intervalSeconds"] = 3;
  s = admin()->Create(kube::kTrainingJobs, kNs, job_object, nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const std::string master = std::string(kJob) + "-master";
  const std::string coordinator = std::string(kJob) + "-coordinator";
  auto metric = [&](const std::string& pod, const std::string& series) {
    return MetricValue(bed_->PodMetrics(kNs, pod), series, -1);
  };
  auto trainer_reconnects = [&] {
    double total = 0;
    for (const json& pod : Pods(kNs, std::string("gaptrain.io/job-name=") + kJob +
                                         ",gaptrain.io/replica-type=trainer")) {
      const double n = MetricValue(bed_->PodMetrics(kNs, pod["metadata"]["name"]),
                                   "gaptrain_worker_reconnects_total{service=\"coordinator\"}", 0);
      total += n;
    }
    return total;
  };
  ASSERT_TRUE(Eventually(
      [&] {
        return metric(master, "gaptrain_master_model_version") >= 200 &&
               metric(master, "gaptrain_master_checkpoints_total") >= 1;
      },
      seconds(120)))
      << Diagnostics();

  // SIGKILLs pod's container and waits until its replacement (a new uid)
  // serves `series` on /metrics; the time of that.
  auto kill_and_await_replacement = [&](const std::string& pod, const std::string& series,
                                        Clock::time_point* killed, Clock::time_point* serving) {
    const std::string old_uid = Get(kube::kPods, kNs, pod)["metadata"]["uid"];
    const Status killing = node()->KillContainer(kNs, pod, SIGKILL);
    ASSERT_TRUE(killing.ok()) << killing.ToString();
    *killed = Clock::now();
    ASSERT_TRUE(Eventually(
        [&] {
          const json replacement = Get(kube::kPods, kNs, pod);
          return replacement.is_object() && replacement["metadata"]["uid"] != old_uid &&
                 metric(pod, series) >= 0;
        },
        seconds(60)))
        << Diagnostics();
    *serving = Clock::now();
  };

  // The master.
  Clock::time_point killed, master_serving;
  ASSERT_NO_FATAL_FAILURE(kill_and_await_replacement(master, "gaptrain_master_model_version",
                                                     &killed, &master_serving));
  const double restored = metric(master, "gaptrain_master_model_version");
  ASSERT_TRUE(Eventually(
      [&] { return metric(master, "gaptrain_master_model_version") > restored; }, seconds(60)))
      << Diagnostics();
  const double master_first_update = Seconds(Clock::now() - master_serving);

  // The coordinator.
  const double reconnects = trainer_reconnects();
  Clock::time_point coordinator_killed, coordinator_serving;
  ASSERT_NO_FATAL_FAILURE(kill_and_await_replacement(
      coordinator, "gaptrain_coordinator_live_trainers", &coordinator_killed,
      &coordinator_serving));
  ASSERT_TRUE(Eventually([&] { return trainer_reconnects() > reconnects; }, seconds(60)))
      << Diagnostics();
  const double coordinator_reached = Seconds(Clock::now() - coordinator_serving);

  json job;
  ASSERT_TRUE(WaitJob(
      [](const json& j) {
        const std::string phase = JobStatus(j).value("phase", "");
        return phase == "Succeeded" || phase == "Failed";
      },
      seconds(480), &job))
      << Diagnostics();
  EXPECT_EQ(JobStatus(job).value("phase", ""), "Succeeded") << Diagnostics();
  EXPECT_GE(Number(JobStatus(job), {"progress", "testAccuracy"}), 0.97) << JobStatus(job).dump(2);
  std::printf(
      "operator e2e: master SIGKILLed, its new pod served %.2f s later and got its first update "
      "%.2f s after serving (resumed at version %.0f); coordinator SIGKILLed, its new pod served "
      "%.2f s later and the trainers reached it %.2f s after serving; the job %s at %.2f%% "
      "(restarts %d, failures %d)\n",
      Seconds(master_serving - killed), master_first_update, restored,
      Seconds(coordinator_serving - coordinator_killed), coordinator_reached,
      JobStatus(job).value("phase", "").c_str(),
      100 * Number(JobStatus(job), {"progress", "testAccuracy"}),
      JobStatus(job).value("restarts", -1), JobStatus(job).value("failures", -1));
  // Issue 28's target is 2 s (measured here 0.2-0.9 s): 5 s leaves room for
  // a loaded CI machine and the scrapes between polls, and still fails on
  // the 23-33 s it took before clients re-resolved.
  EXPECT_LT(master_first_update, 5.0);
  EXPECT_LT(coordinator_reached, 5.0);
}

// Issue 41: θ over two master shards on a cluster. The operator runs
// NAME-master-0 and NAME-master-1 (each its own Service and claim, --shard
// I), the coordinator dials both, the trainers push and pull both. Shard
// 1's container SIGKILLed mid-run: the operator recreates that pod alone
// (restarts 1), it resumes from its own claim, the trainers reach it again,
// and the job Succeeds at the accuracy one master reaches.
TEST_F(OperatorE2eTest, TwoMasterShardsSurviveAKilledShard) {
  if (!StartCluster(Install::kDeploy)) return;
  json job_object;
  Status s = bed_->ReadJob(kJobFile, &job_object);
  ASSERT_TRUE(s.ok()) << s.ToString();
  job_object["spec"]["training"]["epochs"] = 6;
  job_object["spec"]["master"]["shards"] = 2;
  job_object["spec"]["master"]["checkpoint"]["intervalSeconds"] = 3;
  s = admin()->Create(kube::kTrainingJobs, kNs, job_object, nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const std::string shard0 = std::string(kJob) + "-master-0";
  const std::string shard1 = std::string(kJob) + "-master-1";
  auto metric = [&](const std::string& pod, const std::string& series) {
    return MetricValue(bed_->PodMetrics(kNs, pod), series, -1);
  };
  ASSERT_TRUE(Eventually(
      [&] {
        for (const std::string& shard : {shard0, shard1}) {
          if (metric(shard, "gaptrain_master_model_version") < 200 ||
              metric(shard, "gaptrain_master_checkpoints_total") < 1) {
            return false;
          }
        }
        return true;
      },
      seconds(180)))
      << Diagnostics();
  // Each shard's claim is its own, where its master writes.
  for (const std::string& shard : {shard0, shard1}) {
    const json pod = Get(kube::kPods, kNs, shard);
    const std::string index = shard.substr(shard.size() - 1);
    bool claimed = false;
    for (const json& v : pod["spec"]["volumes"]) {
      claimed |= v.value("persistentVolumeClaim", json::object()).value("claimName", "") ==
                 std::string(kJob) + "-checkpoints-" + index;
    }
    EXPECT_TRUE(claimed) << pod["spec"]["volumes"].dump();
  }

  const std::string old_uid = Get(kube::kPods, kNs, shard1)["metadata"]["uid"];
  const double version_before = metric(shard1, "gaptrain_master_model_version");
  const Status killing = node()->KillContainer(kNs, shard1, SIGKILL);
  ASSERT_TRUE(killing.ok()) << killing.ToString();
  const Clock::time_point killed = Clock::now();
  ASSERT_TRUE(Eventually(
      [&] {
        const json replacement = Get(kube::kPods, kNs, shard1);
        return replacement.is_object() && replacement["metadata"]["uid"] != old_uid &&
               metric(shard1, "gaptrain_master_model_version") >= 0;
      },
      seconds(90)))
      << Diagnostics();
  const Clock::time_point serving = Clock::now();
  const double restored = metric(shard1, "gaptrain_master_model_version");
  ASSERT_TRUE(Eventually(
      [&] { return metric(shard1, "gaptrain_master_model_version") > restored; }, seconds(60)))
      << Diagnostics();
  const double first_update = Seconds(Clock::now() - serving);
  // The new master's own measure (master_service.cc): "first update applied
  // S s after serving".
  double logged_first_update = -1;
  const std::string log_path = node()->LogPath(kNs, shard1);
  EXPECT_EQ(log_path.find(old_uid), std::string::npos) << log_path;
  EXPECT_TRUE(Eventually(
      [&] {
        const std::string log = ReadRaw(log_path);
        const size_t at = log.find("first update applied ");
        if (at == std::string::npos) return false;
        logged_first_update = std::atof(log.c_str() + at + std::strlen("first update applied "));
        return true;
      },
      seconds(10)))
      << log_path;

  json job;
  ASSERT_NO_FATAL_FAILURE(AwaitSucceeded(seconds(480), &job));
  const json& status = JobStatus(job);
  const double accuracy = Number(status, {"progress", "testAccuracy"});
  EXPECT_GE(accuracy, 0.97) << status.dump(2);
  // Its exit 137 is a failure too (backoffLimit counts it), as a master's.
  EXPECT_EQ(status.value("restarts", -1), 1) << status.dump(2);
  std::printf(
      "FIGURE operator e2e two master shards: shard 1 SIGKILLed at version %.0f, its new pod "
      "served %.2f s later (resumed at version %.0f) and got its first update %.2f s after "
      "serving (its log: %.2f s); the job %s at %.2f%% (restarts %d, failures %d)\n",
      version_before, Seconds(serving - killed), restored, first_update, logged_first_update,
      status.value("phase", "").c_str(), 100 * accuracy, status.value("restarts", -1),
      status.value("failures", -1));
  EXPECT_LT(first_update, 5.0);

  // spec.output: the export pod joins both shards' final checkpoints; the
  // model loads strictly in plain PyTorch and scores what the job reported.
  json exported;
  ASSERT_NO_FATAL_FAILURE(AwaitOutput(&exported));
  const json output = JobStatus(exported)["output"];
  ASSERT_EQ(output.value("phase", ""), "Succeeded") << output.dump(2) << Diagnostics();
  std::string claim, data;
  ASSERT_TRUE(node()->ClaimPath(kNs, output.value("claimName", ""), &claim).ok());
  ASSERT_TRUE(FindSharedDataDir(&data).ok());
  const std::string model = claim + "/" + output.value("path", "");
  const PlainPytorchScore scored = ScoreStateDict(model, data + "/mnist");
  EXPECT_EQ(scored.exit_code, 0) << scored.output;
  ASSERT_GE(scored.accuracy, 0) << scored.output;
  const double plain = scored.accuracy;
  std::printf("FIGURE operator e2e two master shards: the export scores %.2f%% in plain "
              "PyTorch (the job reported %.2f%%)\n",
              100 * plain, 100 * accuracy);
  EXPECT_NEAR(plain, accuracy, 0.005) << scored.output;
  const json card = json::parse(ReadRaw(model + ".json"), nullptr, false);
  EXPECT_TRUE(card.is_object() && card["checkpoints"].size() == 2) << card.dump(2);
}

// Issue 39: the operator upgraded while a job trains (a new image in its
// Deployment, `kubectl set image`, rolled out by the real Deployment
// controller; the new replicas read their own pod and give new jobs that
// image) does not mix versions inside the job. The job recorded the image
// its first pods got in status.image, and a trainer preempted after the
// upgrade is replaced from that image, not the new operator's. Then the
// user moves the job with the annotation gaptrain.io/image: the next
// replacement gets the new image (Event ImageChanged) while the running
// pods keep theirs. The test node runs no images (a container's command is
// a local binary), so an image is what the pod spec names, and that is what
// is asserted.
TEST_F(OperatorE2eTest, AnOperatorUpgradeKeepsARunningJobsImage) {
  if (!StartCluster(Install::kDeploy)) return;
  const std::string old_image = "ghcr.io/gaptrain/gaptrain:0.1.0";  // deploy/'s
  const std::string new_image = "ghcr.io/gaptrain/gaptrain:0.2.0";
  const auto image_of = [&](const std::string& pod) -> std::string {
    const json object = Get(kube::kPods, kNs, pod);
    return object.is_object() ? object["spec"]["containers"][0].value("image", "") : "";
  };
  json job_object;
  Status s = bed_->ReadJob(kJobFile, &job_object);
  ASSERT_TRUE(s.ok()) << s.ToString();
  // Long enough to outlast the rollout on a busy machine: the test ends
  // before the job does.
  job_object["spec"]["training"]["epochs"] = 40;
  Clock::time_point applied, running;
  json job;
  ASSERT_NO_FATAL_FAILURE(CreateAndAwaitRunning(job_object, &applied, &running, &job));
  EXPECT_EQ(JobStatus(job).value("image", ""), old_image) << JobStatus(job).dump(2);
  for (const json& pod : Pods(kNs, std::string("gaptrain.io/job-name=") + kJob)) {
    EXPECT_EQ(pod["spec"]["containers"][0]["image"], old_image) << pod["metadata"]["name"];
  }

  // The upgrade, as a user makes it.
  const Clock::time_point upgrading = Clock::now();
  std::string output;
  s = bed_->cluster()->Kubectl({"set", "image", "--namespace", kOperatorNamespace,
                                "deployment/gaptrain-operator", "operator=" + new_image},
                               &output);
  ASSERT_TRUE(s.ok()) << s.ToString() << output;
  ASSERT_TRUE(Eventually(
      [&] {
        const std::vector<json> pods = Pods(kOperatorNamespace, kOperatorSelector);
        if (pods.size() != 2) return false;
        for (const json& pod : pods) {
          if (pod["spec"]["containers"][0]["image"] != new_image || !PodReady(pod) ||
              pod["metadata"].contains("deletionTimestamp")) {
            return false;
          }
        }
        const json leader = bed_->Leader();
        return leader.is_object() && leader["spec"]["containers"][0]["image"] == new_image;
      },
      seconds(180)))
      << "the operator's rollout did not finish\n"
      << Diagnostics();
  const Clock::time_point upgraded = Clock::now();
  EXPECT_NE(bed_->OperatorLogs().find("job pods' image, where their template names none: " +
                                      new_image + " (container \"operator\" of pod "),
            std::string::npos)
      << bed_->OperatorLogs();

  // A trainer preempted after the upgrade: replaced from the job's image.
  Clock::time_point training, preempted, replaced;
  ASSERT_NO_FATAL_FAILURE(PreemptOneTrainerAt(1, &training, &preempted, &replaced));
  EXPECT_EQ(image_of(job_ + "-trainer-1"), old_image) << Diagnostics();
  EXPECT_EQ(JobStatus(Job()).value("image", ""), old_image);

  // The user moves the job: pods made from then on get the new image.
  s = admin()->MergePatch(kube::kTrainingJobs, kNs, job_,
                          {{"metadata", {{"annotations", {{"gaptrain.io/image", new_image}}}}}},
                          nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(WaitJob([&](const json& j) { return JobStatus(j).value("image", "") == new_image; },
                      seconds(30), &job))
      << Diagnostics();
  const std::string trainer0 = job_ + "-trainer-0";
  const json before = Get(kube::kPods, kNs, trainer0);
  ASSERT_TRUE(before.is_object());
  EXPECT_EQ(before["spec"]["containers"][0]["image"], old_image);  // running: kept
  s = node()->Preempt(kNs, trainer0, LocalNode::Disruption::kNodeShutdown);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_NO_FATAL_FAILURE(AwaitReplaced(trainer0, before["metadata"]["uid"]));
  EXPECT_EQ(image_of(trainer0), new_image);
  EXPECT_EQ(image_of(job_ + "-trainer-1"), old_image);
  EXPECT_EQ(image_of(job_ + "-master"), old_image);

  ASSERT_TRUE(WaitJob(
      [](const json& j) {
        return JobStatus(j).value("preemptions", -1) == 2 &&
               JobStatus(j).value("phase", "") == "Running";
      },
      seconds(60), &job))
      << Diagnostics();
  EXPECT_EQ(JobStatus(job).value("failures", -1), 0) << JobStatus(job).dump(2);
  std::multiset<std::string> reasons;
  EXPECT_TRUE(Eventually([&] {
    reasons = EventReasons();
    return reasons.count("ImageChanged") == 1 && reasons.count("WorkerPreempted") == 2;
  }, seconds(10))) << ::testing::PrintToString(reasons);
  ExpectOperatorWithinItsPermissions();
  std::printf(
      "operator e2e (upgrade): job Running %.1f s after apply; the operator rolled out to a new "
      "image in %.1f s; a trainer preempted after it was replaced from the job's image in %.1f s\n",
      Seconds(running - applied), Seconds(upgraded - upgrading), Seconds(replaced - preempted));
}

// Issue 31 on the test node, with real trainers: the example job with
// Gap-aware autoscaling (N in [1, 4], starting at 2, decisions every 2 s).
// With maxGap 1000 the first decision doubles it to 4 through the scale
// subresource; a trainer is preempted (node shutdown) while the new ones
// start, and is replaced; then a user tightens maxGap to 1.0001, which
// every asynchronous push exceeds, and the job shrinks, still training.
// The decisions show in `kubectl describe tj` as Events and in
// status.autoscale, and no request of the operator is refused.
TEST_F(OperatorE2eTest, AnAutoscaledJobGrowsShrinksAndSurvivesAPreemptionDuringAResize) {
  if (!StartCluster(Install::kDeploy)) return;
  json job_object;
  Status s = bed_->ReadJob(kJobFile, &job_object);
  ASSERT_TRUE(s.ok()) << s.ToString();
  json& workers = job_object["spec"]["workers"];
  workers["replicas"] = 2;
  workers["minReplicas"] = 1;
  workers["maxReplicas"] = 4;
  workers["autoscale"] = {
      {"enabled", true}, {"maxGap", 1000}, {"minGain", 0}, {"intervalSeconds", 2}};
  job_object["spec"]["training"]["epochs"] = 20;  // deleted long before it ends
  s = admin()->Create(kube::kTrainingJobs, kNs, job_object, nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const std::string trainers =
      std::string("gaptrain.io/job-name=") + kJob + ",gaptrain.io/replica-type=trainer";
  const auto replicas = [](const json& j) { return j["spec"]["workers"].value("replicas", 0); };

  // It grows to 4, through trainingjobs/scale.
  json job;
  ASSERT_TRUE(WaitJob([&](const json& j) { return replicas(j) == 4; }, seconds(120), &job))
      << Diagnostics();
  const Clock::time_point grown = Clock::now();

  // A node shutdown takes trainer-0 while trainers 2 and 3 start.
  const std::string victim = std::string(kJob) + "-trainer-0";
  const std::string old_uid = Get(kube::kPods, kNs, victim)["metadata"]["uid"];
  s = node()->Preempt(kNs, victim, LocalNode::Disruption::kNodeShutdown);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_NO_FATAL_FAILURE(AwaitReplaced(victim, old_uid));
  ASSERT_TRUE(WaitJob(
      [](const json& j) {
        return JobStatus(j).value("preemptions", 0) == 1 &&
               JobStatus(j).value("phase", "") == "Running";
      },
      seconds(60), &job))
      << Diagnostics();
  const Clock::time_point replaced = Clock::now();

  // The bound tightened: it shrinks, and training goes on.
  s = admin()->MergePatch(kube::kTrainingJobs, kNs, kJob,
                          {{"spec", {{"workers", {{"autoscale", {{"maxGap", 1.0001}}}}}}}},
                          nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  // (An Event, not status.autoscale.lastDecision, which the next hold
  // replaces within a window.)
  const auto shrunk_by_gap = [&] {
    kube::ObjectList events;
    EXPECT_TRUE(admin()->List(kube::kEvents, kNs, kube::ListOptions(), &events).ok());
    for (const json& e : events.items) {
      if (e.value("reason", "") == "ScaledDown" &&
          e.value("note", "").find("is above maxGap 1.00") != std::string::npos) {
        return true;
      }
    }
    return false;
  };
  ASSERT_TRUE(Eventually(shrunk_by_gap, seconds(120))) << Diagnostics();
  const Clock::time_point shrunk = Clock::now();
  job = Job();
  EXPECT_LT(replicas(job), 4) << job.dump(2);
  const auto version = [&] {
    return MetricValue(bed_->PodMetrics(kNs, std::string(kJob) + "-master"),
                       "gaptrain_master_model_version", -1);
  };
  const double at_shrink = version();
  EXPECT_TRUE(Eventually([&] { return version() > at_shrink + 50; }, seconds(60))) << Diagnostics();
  ASSERT_TRUE(
      WaitJob([&](const json& j) { return Pods(kNs, trainers).size() == size_t(replicas(j)); },
              seconds(60), &job))
      << Diagnostics();
  EXPECT_EQ(JobStatus(job).value("phase", ""), "Running") << job.dump(2);
  EXPECT_EQ(JobStatus(job).value("failures", -1), 0) << job.dump(2);

  const std::multiset<std::string> reasons = EventReasons();
  EXPECT_GE(reasons.count("ScaledUp"), 1u);
  EXPECT_GE(reasons.count("ScaledDown"), 1u);
  EXPECT_EQ(reasons.count("WorkerPreempted"), 1u);
  std::string described;
  s = bed_->cluster()->Kubectl({"describe", "trainingjob", kJob, "--namespace", kNs}, &described);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_NE(described.find("ScaledUp"), std::string::npos) << described;
  EXPECT_NE(described.find("2 -> 4 trainers"), std::string::npos) << described;
  EXPECT_NE(described.find("ScaledDown"), std::string::npos) << described;
  EXPECT_NE(described.find("Last Decision"), std::string::npos) << described;
  for (const AuditRecord& r : OperatorRequests()) {
    EXPECT_NE(r.code, 403) << r.verb << " " << r.uri;
  }
  const size_t events_at = described.find("\nEvents:");
  std::printf(
      "operator e2e autoscale: grown to 4; a trainer preempted during the resize was replaced "
      "%.1f s later; shrunk to %d trainers %.1f s after maxGap was tightened; the events:\n%s\n",
      Seconds(replaced - grown), replicas(job), Seconds(shrunk - replaced),
      events_at == std::string::npos ? "" : described.substr(events_at).c_str());
  s = admin()->Delete(kube::kTrainingJobs, kNs, kJob, kube::DeleteOptions());
  EXPECT_TRUE(s.ok()) << s.ToString();
}

// Issue 32: a user's own PyTorch trainer on the cluster. gaptrain installed
// from deploy/, the datasets filled as the other tests fill them, and
// examples/python/job-cluster.yaml (FashionCNN on Fashion-MNIST, 4 Python
// trainers running train.py with the SDK, GA+DANA) applied with only what a
// test node needs: its image, which would hold train.py, the SDK and
// fashion_cnn.pt, is the one thing the node cannot provide, so the
// trainers' command and spec.model.torchscript name the checkout's files
// (the node runs each container's command on this machine); and 1 epoch,
// not 4, to keep it short. Once training is under way one Python trainer
// is preempted as a node shutdown does: it is replaced and ready (the
// SDK's /healthz on port 9092 is its readiness probe), and the job reaches
// Succeeded with preemptions 1, failures 0 and at least 80% test accuracy
// (the C++ evaluator scores the TorchScript), the Python trainers' /metrics
// served gaptrain_worker_samples_total, and no request of the operator was
// refused. Prints the times it measured.
TEST_F(OperatorE2eTest, APythonTrainerJobRunsThroughAPreemption) {
  const Clock::time_point installing = Clock::now();
  if (!StartCluster(Install::kDeploy)) return;
  const Clock::time_point installed = Clock::now();
  // The checkout: README.md's runfile leads back to it (as
  // FindSharedDataDir finds the data).
  const std::string readme = AbsolutePath("README.md");
  ASSERT_EQ(readme.front(), '/') << readme;
  const std::string checkout = readme.substr(0, readme.rfind('/'));
  const std::string example = checkout + "/examples/python";

  job_ = "python-fashion-cnn";
  json job_object;
  Status s = bed_->ReadJob(example + "/job-cluster.yaml", &job_object);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(job_object["metadata"].value("name", ""), job_);
  // The image's files, on this machine: the container's command runs here
  // (python3 is the host's, /usr/bin/python3, with torch, grpcio, protobuf
  // and yaml; train.py finds the SDK in the checkout's python/ next to it,
  // where the image has it installed, so no PYTHONPATH is needed), and the
  // master and the evaluator read the model's TorchScript from this path.
  json& spec = job_object["spec"];
  ASSERT_EQ(spec["model"].value("torchscript", ""), "/app/fashion_cnn.pt");
  spec["model"]["torchscript"] = example + "/fashion_cnn.pt";
  json& command = spec["workers"]["template"]["spec"]["containers"][0]["command"];
  ASSERT_EQ(command, json({"python3", "/app/train.py"}));
  command[1] = example + "/train.py";
  spec["training"]["epochs"] = 1;  // short: the accuracy bar is 80%, not the example's
  ASSERT_EQ(spec["data"].value("claimName", ""), "fashion-mnist-data");

  Clock::time_point applied, running;
  json job;
  ASSERT_NO_FATAL_FAILURE(CreateAndAwaitRunning(job_object, &applied, &running, &job));

  // Training is under way: the 4 Python trainers ready (their /healthz),
  // serving their samples on /metrics, and the master updating.
  const std::string trainers =
      "gaptrain.io/job-name=" + job_ + ",gaptrain.io/replica-type=trainer";
  const std::string master = job_ + "-master";
  std::map<std::string, double> samples;  // trainer pod -> gaptrain_worker_samples_total
  ASSERT_TRUE(Eventually(
      [&] {
        size_t ready = 0;
        for (const json& pod : Pods(kNs, trainers)) {
          if (!PodReady(pod)) continue;
          ++ready;
          const std::string name = pod["metadata"]["name"];
          samples[name] = MetricValue(bed_->PodMetrics(kNs, name),
                                      "gaptrain_worker_samples_total", -1);
        }
        return ready == 4 &&
               MetricValue(bed_->PodMetrics(kNs, master), "gaptrain_master_model_version", 0) >=
                   100;
      },
      seconds(90)))
      << Diagnostics();
  const Clock::time_point training = Clock::now();
  for (const json& pod : Pods(kNs, trainers)) {
    const json& container = pod["spec"]["containers"][0];
    EXPECT_EQ(container["command"], json({"python3", example + "/train.py"}))
        << "the operator runs the template's command as given: " << container.dump(2);
    EXPECT_EQ(NamedPort(pod, "metrics"), 9092) << container.dump(2);
  }
  ASSERT_TRUE(Eventually(
      [&] {
        bool all = samples.size() == 4;
        for (auto& [name, n] : samples) {
          if (n <= 0) {
            n = MetricValue(bed_->PodMetrics(kNs, name), "gaptrain_worker_samples_total", -1);
          }
          all = all && n > 0;
        }
        return all;
      },
      seconds(30)))
      << ::testing::PrintToString(samples) << Diagnostics();

  // A node shutdown takes one Python trainer.
  const std::string victim = job_ + "-trainer-1";
  const json victim_pod = Get(kube::kPods, kNs, victim);
  ASSERT_TRUE(victim_pod.is_object()) << victim;
  const std::string old_uid = victim_pod["metadata"]["uid"];
  s = node()->Preempt(kNs, victim, LocalNode::Disruption::kNodeShutdown);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const Clock::time_point preempted = Clock::now();
  ASSERT_NO_FATAL_FAILURE(AwaitReplaced(victim, old_uid));
  const Clock::time_point replaced = Clock::now();
  // The replacement trains: its /metrics counts its own samples (unless
  // the job ended first).
  double replacement_samples = -1;
  EXPECT_TRUE(Eventually(
      [&] {
        replacement_samples =
            MetricValue(bed_->PodMetrics(kNs, victim), "gaptrain_worker_samples_total", -1);
        return replacement_samples > 0 ||
               JobStatus(Job()).value("phase", "") == "Succeeded";
      },
      seconds(60)))
      << Diagnostics();

  ASSERT_NO_FATAL_FAILURE(AwaitSucceeded(seconds(240), &job));
  const Clock::time_point succeeded = Clock::now();
  const json& status = JobStatus(job);
  const double accuracy = Number(status, {"progress", "testAccuracy"});
  EXPECT_GE(accuracy, 0.80) << status.dump(2) << Diagnostics();
  EXPECT_EQ(status.value("preemptions", -1), 1) << status.dump(2);
  EXPECT_EQ(status.value("failures", -1), 0) << status.dump(2);

  // The replacement is a new pod that ran train.py.
  const std::string log_path = node()->LogPath(kNs, victim);
  EXPECT_EQ(log_path.find(old_uid), std::string::npos) << log_path;
  EXPECT_FALSE(ReadRaw(log_path).empty()) << log_path;
  const std::multiset<std::string> reasons = EventReasons();
  EXPECT_EQ(reasons.count("WorkerPreempted"), 1u);

  ExpectOperatorWithinItsPermissions();

  double total_samples = 0;
  for (const auto& [name, n] : samples) total_samples += n;
  std::printf(
      "operator e2e python: control plane, node and operator pods ready %.1f s after the start; "
      "job Running %.1f s after apply, 4 Python trainers ready and the master at version 100 "
      "%.1f s after apply (their /metrics: %.0f samples); 1 trainer preempted at %.1f s, "
      "replaced and ready %.1f s later (its /metrics: %.0f samples); Succeeded %.1f s after "
      "apply; accuracy %.2f%%, preemptions %d, failures %d\n",
      Seconds(installed - installing), Seconds(running - applied), Seconds(training - applied),
      total_samples, Seconds(preempted - applied), Seconds(replaced - preempted),
      replacement_samples, Seconds(succeeded - applied), 100 * accuracy,
      status.value("preemptions", -1), status.value("failures", -1));
}

// Issue 40: the restart rules of gaptrain run and the operator are one
// (services/jobplan). The cases of tests/restart_cases.h, with the trainer
// and the manifest that tests/restart_policy_e2e_test.cc gives gaptrain
// run, as five jobs at once on the real control plane (their trainers
// are processes on the test node, exiting with the code or the signal a
// container would): each ends as it does locally, with the same reason
// and message, and counts each trainer's crash once.
TEST_F(OperatorE2eTest, ACrashUnderEachRestartPolicyEndsTheJobAsGaptrainRunDoes) {
  if (!StartCluster(Install::kDeploy)) return;
  const std::string readme = AbsolutePath("README.md");
  ASSERT_EQ(readme.front(), '/') << readme;
  const std::string checkout = readme.substr(0, readme.rfind('/'));
  // One script for every job: its markers are per pod name.
  const std::string dir = TestTempDir("restart-cases");
  std::ofstream(dir + "/trainer.py") << CrashOnceTrainerScript();
  const std::vector<RestartCase>& cases = RestartCases();
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string file = dir + "/job-" + std::to_string(i) + ".yaml";
    std::ofstream(file) << RestartJobYaml(
        cases[i], "restarts-" + std::to_string(i), dir + "/trainer.py",
        checkout + "/python:" + checkout + "/python/examples:" + checkout + "/examples/python",
        "{format: mnist-idx, path: /data/fashion-mnist, claimName: fashion-mnist-data, "
        "shuffleSeed: 1}");
    json job_object;
    const Status read = bed_->ReadJob(file, &job_object);
    ASSERT_TRUE(read.ok()) << read.ToString();
    const Status created = admin()->Create(kube::kTrainingJobs, kNs, job_object, nullptr);
    ASSERT_TRUE(created.ok()) << created.ToString();
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    const RestartCase& c = cases[i];
    SCOPED_TRACE(c.Name());
    job_ = "restarts-" + std::to_string(i);
    json job;
    ASSERT_TRUE(WaitJob(
        [](const json& j) {
          const std::string phase = JobStatus(j).value("phase", "");
          return phase == "Succeeded" || phase == "Failed";
        },
        seconds(240), &job))
        << Diagnostics();
    const json& status = JobStatus(job);
    EXPECT_EQ(status.value("phase", ""), c.outcome) << status.dump(2);
    json ended;
    for (const json& condition : status.value("conditions", json::array())) {
      if (condition.value("type", "") == c.outcome) ended = condition;
    }
    ASSERT_TRUE(ended.is_object()) << status.dump(2);
    // A success is the coordinator's (its reason leads the message); a
    // failure the restart rules', word for word as gaptrain run's.
    const bool succeeded = c.outcome == "Succeeded";
    EXPECT_EQ(ended.value("reason", ""), succeeded ? "TrainingJobSucceeded" : c.reason)
        << ended.dump(2);
    EXPECT_NE(ended.value("message", "").find(succeeded ? c.reason : c.message),
              std::string::npos)
        << ended.dump(2);
    EXPECT_EQ(status.value("failures", -1), 2) << status.dump(2);
    std::printf("operator e2e restarts: %s -> %s (%s: %s), failures %d\n", c.Name().c_str(),
                status.value("phase", "").c_str(), ended.value("reason", "").c_str(),
                ended.value("message", "").c_str(), status.value("failures", -1));
  }
}

// Issue 37: torchvision's ResNet-18 on the cluster with no spec.model.
// examples/torchvision/job-cluster.yaml as shipped but for what the test
// node needs (its image's train.py is the checkout's, as above) and for
// size: 2 trainers, not 4, for 60 updates, the evaluator scoring 500 test
// images. The first trainer declares the module to the master (no
// TorchScript anywhere); one trainer is preempted as a node shutdown does
// once the master is at version 20, and is replaced; the job succeeds, the
// Python evaluator's accuracy shows in `kubectl get tj`, and the model
// comes out through spec.output with its 60 BatchNorm buffers.
TEST_F(OperatorE2eTest, TorchvisionResnet18DeclaredByItsTrainersRunsThroughAPreemption) {
  if (!StartCluster(Install::kDeploy)) return;
  const std::string readme = AbsolutePath("README.md");
  ASSERT_EQ(readme.front(), '/') << readme;
  const std::string example = readme.substr(0, readme.rfind('/')) + "/examples/torchvision";

  job_ = "resnet18-fashion-mnist";
  json job_object;
  Status s = bed_->ReadJob(example + "/job-cluster.yaml", &job_object);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(job_object["metadata"].value("name", ""), job_);
  json& spec = job_object["spec"];
  ASSERT_EQ(spec["model"], json({{"fromTrainer", true}}));
  spec["training"].erase("epochs");
  spec["training"]["maxUpdates"] = 60;
  spec["training"]["evalEveryUpdates"] = 100000;  // the final evaluation only
  spec["workers"]["replicas"] = 2;
  spec["workers"]["minReplicas"] = 1;
  for (const char* role : {"workers", "evaluator"}) {
    json& container = spec[role]["template"]["spec"]["containers"][0];
    ASSERT_EQ(container["command"], json({"python3", "/app/train.py"})) << role;
    container["command"][1] = example + "/train.py";
    container["args"] = std::string(role) == "evaluator"
                            ? json({"--eval-samples", "500", "--threads", "1"})
                            : json({"--threads", "1"});
    container["resources"]["requests"]["cpu"] = "1";
  }

  Clock::time_point applied, running;
  json job;
  ASSERT_NO_FATAL_FAILURE(CreateAndAwaitRunning(job_object, &applied, &running, &job));
  const std::string master = job_ + "-master";
  Clock::time_point training, preempted, replaced;
  ASSERT_NO_FATAL_FAILURE(PreemptOneTrainerAt(20, &training, &preempted, &replaced));

  ASSERT_NO_FATAL_FAILURE(AwaitSucceeded(seconds(240), &job));
  const Clock::time_point succeeded = Clock::now();
  const json& status = JobStatus(job);
  const double accuracy = Number(status, {"progress", "testAccuracy"});
  EXPECT_GE(accuracy, 0.4) << status.dump(2) << Diagnostics();
  EXPECT_EQ(status.value("preemptions", -1), 1) << status.dump(2);
  EXPECT_EQ(status.value("failures", -1), 0) << status.dump(2);
  std::string master_log;
  EXPECT_TRUE(node()->Logs(kNs, master, &master_log).ok());
  EXPECT_NE(master_log.find("declared the model: 62 tensors, 11172810 parameters, 60 buffers"),
            std::string::npos)
      << master_log;
  std::string evaluator_log;
  EXPECT_TRUE(node()->Logs(kNs, job_ + "-evaluator", &evaluator_log).ok());
  EXPECT_NE(evaluator_log.find("top5_accuracy"), std::string::npos) << evaluator_log;

  // What a user sees: the evaluator's accuracy in `kubectl get tj`.
  std::string listed;
  s = bed_->cluster()->Kubectl({"get", "trainingjobs", job_, "--namespace", kNs}, &listed);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const std::string shown = JobStatus(job)["display"].value("accuracy", "");
  EXPECT_FALSE(shown.empty()) << status.dump(2);
  EXPECT_NE(listed.find("Succeeded"), std::string::npos) << listed;
  EXPECT_NE(listed.find(shown), std::string::npos) << listed;
  // The job's target is the evaluator's own top-5 accuracy: its value
  // against the bound in the Target column.
  const double top5 = Number(status, {"progress", "testMetrics", "top5_accuracy"});
  EXPECT_GE(top5, accuracy) << status.dump(2);
  const std::string target = JobStatus(job)["display"].value("target", "");
  EXPECT_EQ(target.rfind("top5_accuracy 0.", 0), 0u) << status.dump(2);
  EXPECT_NE(target.find(" (>= 0.995)"), std::string::npos) << target;
  EXPECT_NE(listed.find(target), std::string::npos) << listed;

  // The model came out through spec.output, and loads with strict=True
  // into the example's module, buffers included, scoring what the job
  // reported on the same 500 images.
  json exported;
  ASSERT_NO_FATAL_FAILURE(AwaitOutput(&exported));
  ASSERT_EQ(JobStatus(exported)["output"].value("phase", ""), "Succeeded") << Diagnostics();
  std::string claim, data;
  ASSERT_TRUE(node()->ClaimPath(kNs, "models", &claim).ok());
  ASSERT_TRUE(FindSharedDataDir(&data).ok());
  const std::string scorer = dir_ + "/score_resnet18.py";
  std::ofstream(scorer) << "import sys, torch, train\n"
                           "from fashion_mnist import FashionMNIST\n"
                           "from model import resnet18_for_fashion_mnist\n"
                           "m = resnet18_for_fashion_mnist()\n"
                           "m.load_state_dict(torch.load(sys.argv[1]), strict=True)\n"
                           "m.eval()\n"
                           "t = FashionMNIST(sys.argv[2], False, train.TEST_TRANSFORM)\n"
                           "with torch.no_grad():\n"
                           "    a = train.evaluate(m, torch.utils.data.Subset(t, range(500)))\n"
                           "print('EXPORT_ACCURACY %.6f' % a['accuracy'])\n";
  const std::string command = "PYTHONPATH=" + example + " /usr/bin/python3 " + scorer + " '" +
                              claim + "/resnet18-fashion-mnist.pt' '" + data +
                              "/fashion-mnist'";
  std::string scored;
  EXPECT_EQ(RunShell(command, &scored), 0) << scored;
  const size_t at = scored.find("EXPORT_ACCURACY ");
  ASSERT_NE(at, std::string::npos) << scored;
  EXPECT_NEAR(std::atof(scored.c_str() + at + 16), accuracy, 0.01) << scored;
  ExpectOperatorWithinItsPermissions();
  std::printf(
      "operator e2e resnet18: job Running %.1f s after apply, the master at version 20 %.1f s "
      "after apply; 1 trainer preempted, replaced and ready %.1f s later; Succeeded %.1f s "
      "after apply; accuracy %.2f%% (kubectl get tj: %s)\n",
      Seconds(running - applied), Seconds(training - applied), Seconds(replaced - preempted),
      Seconds(succeeded - applied), 100 * accuracy, shown.c_str());
}

// Issue 38: a folder of PNG images read by the trainers' own code on the
// cluster. examples/image_folder/job-cluster.yaml as shipped but for what
// the test node needs (its image's train.py is the checkout's) and for
// size: the images are 6,000 training and 500 test PNGs written by
// make_image_folder.py onto the fashion-mnist-data claim (beside its IDX
// files), 2 trainers for 8 epochs. gaptrain mounts the claim and never
// reads it (`format: custom`, trainSamples 6000): torchvision's ImageFolder
// does, in the trainers and the evaluator. One trainer is preempted as a
// node shutdown does once the master is at version 10, and is replaced;
// every position of the 8 epochs is completed (EpochsCompleted). The
// trainers and the evaluator run as a ServiceAccount annotated for IRSA and
// get a Secret's keys through envFrom, as a job reading object storage
// would.
TEST_F(OperatorE2eTest, AnImageFolderReadByTheTrainersRunsThroughAPreemption) {
  if (!StartCluster(Install::kDeploy)) return;
  const std::string readme = AbsolutePath("README.md");
  ASSERT_EQ(readme.front(), '/') << readme;
  const std::string example = readme.substr(0, readme.rfind('/')) + "/examples/image_folder";
  std::string claim, data;
  ASSERT_TRUE(node()->ClaimPath(kNs, "fashion-mnist-data", &claim).ok());
  ASSERT_TRUE(FindSharedDataDir(&data).ok());
  std::string made;
  ASSERT_EQ(RunShell("/usr/bin/python3 " + example + "/make_image_folder.py --data '" + data +
                         "/fashion-mnist' --out '" + claim +
                         "' --train-samples 6000 --test-samples 500",
                     &made),
            0)
      << made;

  job_ = "fashion-mnist-png";
  json job_object;
  Status s = bed_->ReadJob(example + "/job-cluster.yaml", &job_object);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(job_object["metadata"].value("name", ""), job_);
  json& spec = job_object["spec"];
  ASSERT_EQ(spec["data"].value("format", ""), "custom");
  spec["data"]["claimName"] = "fashion-mnist-data";
  spec["data"]["trainSamples"] = 6000;
  // Long enough for the replacement to be ready and train too: with one
  // OpenBLAS thread (--threads 1) two trainers run 3 epochs in about 7 s,
  // less than a replacement takes to start (the shards job's 6 s).
  constexpr int kEpochs = 8;
  spec["training"]["epochs"] = kEpochs;
  spec["training"]["evalEveryUpdates"] = 100000;  // the final evaluation only
  spec["workers"]["replicas"] = 2;
  spec["workers"]["minReplicas"] = 1;
  // Credentials as a user's data store needs them: a ServiceAccount as IRSA
  // annotates one, and a Secret's keys through envFrom, both in the
  // templates; the operator keeps them, and the test node issues the
  // account's token and resolves the Secret as a kubelet does.
  std::string made_objects;
  s = bed_->cluster()->Kubectl(
      {"--namespace", kNs, "create", "serviceaccount", "image-reader"}, &made_objects);
  ASSERT_TRUE(s.ok()) << s.ToString() << made_objects;
  s = bed_->cluster()->Kubectl({"--namespace", kNs, "annotate", "serviceaccount", "image-reader",
                                "eks.amazonaws.com/role-arn=arn:aws:iam::111122223333:role/"
                                "image-reader"},
                               &made_objects);
  ASSERT_TRUE(s.ok()) << s.ToString() << made_objects;
  s = bed_->cluster()->Kubectl({"--namespace", kNs, "create", "secret", "generic",
                                "store-credentials", "--from-literal=AWS_ACCESS_KEY_ID=test-key",
                                "--from-literal=AWS_SECRET_ACCESS_KEY=not-a-secret"},
                               &made_objects);
  ASSERT_TRUE(s.ok()) << s.ToString() << made_objects;
  for (const char* role : {"workers", "evaluator"}) {
    spec[role]["template"]["spec"]["serviceAccountName"] = "image-reader";
    json& container = spec[role]["template"]["spec"]["containers"][0];
    ASSERT_EQ(container["command"], json({"python3", "/app/train.py"})) << role;
    container["command"][1] = example + "/train.py";
    container["args"] = json({"--threads", "1"});
    container["envFrom"] = json::parse(R"j([{"secretRef": {"name": "store-credentials"}}])j");
  }

  Clock::time_point applied, running;
  json job;
  ASSERT_NO_FATAL_FAILURE(CreateAndAwaitRunning(job_object, &applied, &running, &job));
  for (const std::string pod : {job_ + "-trainer-0", job_ + "-evaluator"}) {
    const json object = Get(kube::kPods, kNs, pod);
    ASSERT_TRUE(object.is_object()) << pod;
    EXPECT_EQ(object["spec"].value("serviceAccountName", ""), "image-reader") << pod;
    EXPECT_EQ(object["spec"]["containers"][0]["envFrom"],
              json::parse(R"j([{"secretRef": {"name": "store-credentials"}}])j"))
        << pod;
  }
  Clock::time_point training, preempted, replaced;
  ASSERT_NO_FATAL_FAILURE(PreemptOneTrainerAt(10, &training, &preempted, &replaced));

  ASSERT_NO_FATAL_FAILURE(AwaitSucceeded(seconds(240), &job));
  const Clock::time_point succeeded = Clock::now();
  const json& status = JobStatus(job);
  std::string succeeded_message;
  for (const json& c : status.value("conditions", json::array())) {
    if (c.value("type", "") == "Succeeded") succeeded_message = c.value("message", "");
  }
  EXPECT_EQ(succeeded_message.rfind("EpochsCompleted", 0), 0u) << status.dump(2);
  EXPECT_EQ(Number(status, {"progress", "epoch"}), kEpochs) << status.dump(2);
  const double accuracy = Number(status, {"progress", "testAccuracy"});
  EXPECT_GE(accuracy, 0.5) << status.dump(2) << Diagnostics();
  EXPECT_EQ(status.value("preemptions", -1), 1) << status.dump(2);
  EXPECT_EQ(status.value("failures", -1), 0) << status.dump(2);
  std::string evaluator_log;
  EXPECT_TRUE(node()->Logs(kNs, job_ + "-evaluator", &evaluator_log).ok());
  EXPECT_NE(evaluator_log.find("500 test samples"), std::string::npos) << evaluator_log;
  ExpectOperatorWithinItsPermissions();
  std::printf(
      "operator e2e image folder: job Running %.1f s after apply; 1 trainer preempted, replaced "
      "and ready %.1f s later; Succeeded %.1f s after apply; accuracy %.2f%% on 500 test PNGs\n",
      Seconds(running - applied), Seconds(replaced - preempted), Seconds(succeeded - applied),
      100 * accuracy);
}

// Issue 38: tar shards streamed from an S3-compatible store by the
// trainers' own code on the cluster (ShardsInAStoreJob): gaptrain mounts
// nothing, each trainer streams the shards the coordinator gives it
// (`format: shards`). One trainer is preempted as a node shutdown does once
// the master is at version 10, and is replaced; the coordinator's log shows
// each of the 8 epochs' 8 shards completed exactly once.
TEST_F(OperatorE2eTest, ShardsInAStoreAreStreamedThroughAPreemption) {
  if (!RequireS3Server()) return;
  if (!StartCluster(Install::kDeploy)) return;
  S3TestServer store;
  json job_object;
  // Long enough for the replacement to train too: the MLP runs through an
  // epoch of 6,000 PNGs in about a second, its pod starts in a few.
  ASSERT_NO_FATAL_FAILURE(ShardsInAStoreJob(8, &store, &job_object));
  Clock::time_point applied, running;
  json job;
  ASSERT_NO_FATAL_FAILURE(CreateAndAwaitRunning(job_object, &applied, &running, &job));
  Clock::time_point training, preempted, replaced;
  ASSERT_NO_FATAL_FAILURE(PreemptOneTrainerAt(10, &training, &preempted, &replaced));

  ASSERT_NO_FATAL_FAILURE(AwaitSucceeded(seconds(240), &job));
  const Clock::time_point succeeded = Clock::now();
  const json& status = JobStatus(job);
  EXPECT_EQ(Number(status, {"progress", "epoch"}), 8) << status.dump(2);
  const double accuracy = Number(status, {"progress", "testAccuracy"});
  EXPECT_GE(accuracy, 0.5) << status.dump(2) << Diagnostics();
  EXPECT_EQ(status.value("preemptions", -1), 1) << status.dump(2);
  std::string coordinator_log;
  ASSERT_TRUE(node()->Logs(kNs, job_ + "-coordinator", &coordinator_log).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectEachEpochCoveredOnce(coordinator_log, 8, 8));
  ExpectOperatorWithinItsPermissions();
  std::printf(
      "operator e2e shards: job Running %.1f s after apply; 1 trainer preempted, replaced and "
      "ready %.1f s later; 8 epochs of 8 shards streamed from the store, each once; Succeeded "
      "%.1f s after apply; accuracy %.2f%% on the test shard\n",
      Seconds(running - applied), Seconds(replaced - preempted), Seconds(succeeded - applied),
      100 * accuracy);
}

// Issue 38: the same job's store goes away once the master is at version
// 10 (the S3 server stopped). The trainers hand back the shards they cannot
// read; the job says why, the condition DataUnavailable (True,
// StoreUnreachable, the trainer's error) and a Warning Event; once the
// store is back (the same server started again) the job finishes, the
// condition False (DataAvailable), every shard of its 4 epochs completed
// exactly once.
TEST_F(OperatorE2eTest, AJobWhoseStoreGoesAwaySaysWhyAndFinishesWhenItReturns) {
  if (!RequireS3Server()) return;
  if (!StartCluster(Install::kDeploy)) return;
  S3TestServer store;
  json job_object;
  ASSERT_NO_FATAL_FAILURE(ShardsInAStoreJob(4, &store, &job_object));
  Clock::time_point applied, running;
  json job;
  ASSERT_NO_FATAL_FAILURE(CreateAndAwaitRunning(job_object, &applied, &running, &job));
  const std::string master = job_ + "-master";
  ASSERT_TRUE(Eventually(
      [&] {
        return MetricValue(bed_->PodMetrics(kNs, master), "gaptrain_master_model_version", 0) >=
               10;
      },
      seconds(120)))
      << Diagnostics();
  store.Stop();
  const Clock::time_point away = Clock::now();
  // The operator reads the coordinator's status every poll (15 s here).
  ASSERT_TRUE(WaitJob(
      [&](const json& j) { return Condition(j, "DataUnavailable").value("status", "") == "True"; },
      seconds(60), &job))
      << JobStatus(job).dump(2) << Diagnostics();
  const json unavailable = Condition(job, "DataUnavailable");
  const Clock::time_point shown = Clock::now();
  EXPECT_EQ(unavailable.value("reason", ""), "StoreUnreachable") << unavailable.dump(2);
  EXPECT_NE(unavailable.value("message", "").find("cannot reach its data"), std::string::npos)
      << unavailable.dump(2);
  // The Event follows the status it reports.
  EXPECT_TRUE(Eventually([&] { return EventReasons().count("DataUnavailable") == 1; },
                         seconds(10)));
  ASSERT_TRUE(store.Start().ok());

  ASSERT_NO_FATAL_FAILURE(AwaitSucceeded(seconds(240), &job));
  const json available = Condition(job, "DataUnavailable");
  EXPECT_EQ(available.value("status", ""), "False") << JobStatus(job).dump(2);
  EXPECT_EQ(available.value("reason", ""), "DataAvailable") << available.dump(2);
  std::multiset<std::string> reasons;
  EXPECT_TRUE(Eventually([&] {
    reasons = EventReasons();
    return reasons.count("DataAvailable") == 1;
  }, seconds(10)));
  EXPECT_EQ(reasons.count("DataUnavailable"), 1u);
  std::string coordinator_log;
  ASSERT_TRUE(node()->Logs(kNs, job_ + "-coordinator", &coordinator_log).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectEachEpochCoveredOnce(coordinator_log, 4, 8));
  EXPECT_NE(coordinator_log.find(") handed back by worker "), std::string::npos)
      << coordinator_log;
  std::printf(
      "operator e2e store outage: the job showed DataUnavailable %.1f s after its store went "
      "away (%s); Succeeded once it was back, 4 epochs of 8 shards each completed once, "
      "accuracy %.2f%%\n",
      Seconds(shown - away), unavailable.value("message", "").c_str(),
      100 * Number(JobStatus(job), {"progress", "testAccuracy"}));
}

// Issue 39: spec.runPolicy.scheduleTimeoutSeconds on the real scheduler. A
// job whose 2 trainers ask for 20 CPUs each, on a node that offers 32: the
// scheduler places one, which then waits for a second that can never come
// (as two jobs each holding part of a GPU pool would wait for each other).
// After the timeout (5 s) the operator gives the placed trainer's node back
// (its pod deleted gracefully, Event TrainersReleased, status.gang) and
// makes no trainer during its backoff; the template asking for less meanwhile,
// the trainers made after the backoff fit, and the job runs to its end with
// neither a preemption nor a failure counted.
TEST_F(OperatorE2eTest, AJobThatCannotGetItsTrainersGivesBackWhatItHolds) {
  if (!StartCluster(Install::kDeploy)) return;
  json job_object;
  Status s = bed_->ReadJob(kJobFile, &job_object);
  ASSERT_TRUE(s.ok()) << s.ToString();
  json& spec = job_object["spec"];
  spec["training"].erase("epochs");
  spec["training"]["maxUpdates"] = 300;
  spec["workers"]["replicas"] = 2;
  spec["workers"]["minReplicas"] = 2;
  spec["runPolicy"]["scheduleTimeoutSeconds"] = 5;
  json& resources = spec["workers"]["template"]["spec"]["containers"][0]["resources"];
  resources["requests"]["cpu"] = "20";
  s = admin()->Create(kube::kTrainingJobs, kNs, job_object, nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  job_ = kJob;

  // One trainer placed and running, the other unschedulable; then released.
  const std::string trainers =
      std::string("gaptrain.io/job-name=") + kJob + ",gaptrain.io/replica-type=trainer";
  ASSERT_TRUE(Eventually([&] { return EventReasons().count("TrainersReleased") >= 1; },
                         seconds(120)))
      << Diagnostics();
  const Clock::time_point released = Clock::now();
  json job = Job();
  EXPECT_GE(JobStatus(job).value("gang", json::object()).value("releases", 0), 1)
      << JobStatus(job).dump(2);
  EXPECT_EQ(JobStatus(job).value("phase", ""), "Pending") << JobStatus(job).dump(2);
  // Given back: no trainer pod left while the job backs off.
  ASSERT_TRUE(Eventually([&] { return Pods(kNs, trainers).empty(); }, seconds(30)))
      << Diagnostics();

  // Asking for what the node has: the trainers made after the backoff fit.
  s = admin()->MergePatch(
      kube::kTrainingJobs, kNs, kJob,
      {{"spec", {{"workers", {{"template", {{"spec", {{"containers", json::array({
          {{"name", "gaptrain"},
           {"resources", {{"requests", {{"cpu", "500m"}, {"memory", "512Mi"}}},
                          {"limits", {{"memory", "1Gi"}}}}}}})}}}}}}}}}},
      nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_NO_FATAL_FAILURE(AwaitSucceeded(seconds(240), &job));
  const json& status = JobStatus(job);
  EXPECT_EQ(status.value("preemptions", -1), 0) << status.dump(2);
  EXPECT_EQ(status.value("failures", -1), 0) << status.dump(2);
  // The releases on record, no wait left.
  const json gang = status.value("gang", json::object());
  EXPECT_GE(gang.value("releases", 0), 1) << status.dump(2);
  EXPECT_TRUE(gang.contains("releasedAt")) << status.dump(2);
  EXPECT_FALSE(gang.contains("waitingSince")) << status.dump(2);
  ExpectOperatorWithinItsPermissions();
  std::printf("operator e2e gang release: the job gave its placed trainer back after its 5 s "
              "timeout (%d release(s)), made its trainers again after the backoff and "
              "Succeeded %.1f s after the release\n",
              status.value("gang", json::object()).value("releases", 0),
              Seconds(Clock::now() - released));
}

// The CPU a Workload's trainers (or its other PodSets) ask for in all:
// each PodSet's count times its pod's containers' requests ("500m", "2").
double WorkloadCpu(const json& workload, bool trainers) {
  double cpu = 0;
  for (const json& pod_set : workload["spec"]["podSets"]) {
    if ((pod_set.value("name", "") == "trainers") != trainers) continue;
    for (const json& c : pod_set["template"]["spec"]["containers"]) {
      const std::string q =
          c.value("resources", json::object()).value("requests", json::object()).value("cpu", "0");
      const double cores = q.back() == 'm' ? std::stod(q.substr(0, q.size() - 1)) / 1000
                                           : std::stod(q);
      cpu += pod_set.value("count", 0) * cores;
    }
  }
  return cpu;
}

std::string WorkloadCondition(const json& workload, const std::string& type) {
  for (const json& c : workload.value("status", json::object()).value("conditions", json::array())) {
    if (c.value("type", "") == type) return c.value("status", "");
  }
  return "";
}

// Kueue's real controller (v0.17, TrainingJob an external framework) and the
// chart's kueue.enabled: a ClusterQueue with room for one job, two flavors
// on the test node (on-demand, and spot, tainted so only pods that tolerate
// spot get it), preemption of lower priorities. The low-priority job's
// priority comes from a WorkloadPriorityClass (Kueue's label), the high
// one's from its trainers' PriorityClass. A low-priority job waits
// until the queue exists, then runs, its trainers on spot and the rest on
// on-demand; a high-priority job arrives and Kueue preempts the first: its
// pods stop and its quota is given back while it waits with Kueue's reason,
// its checkpoints kept; the second runs to the end and finishes its
// Workload; the first is admitted again, resumes and finishes.
TEST_F(OperatorE2eTest, KueueAdmitsJobsByQuotaFlavorAndPriority) {
  if (!StartCluster(Install::kChart, /*kueue=*/true)) return;
  json base;
  Status s = bed_->ReadJob(kJobFile, &base);
  ASSERT_TRUE(s.ok()) << s.ToString();
  base["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "team-queue";
  json& spec = base["spec"];
  spec["training"].erase("epochs");
  spec["workers"]["replicas"] = 2;
  // Trainers tolerate the spot flavor's taint; the others ask for CPU, so
  // Kueue gives them a flavor too (the one without a taint).
  spec["workers"]["template"]["spec"]["tolerations"] = {
      {{"key", "gaptrain.test/spot"}, {"operator", "Exists"}, {"effect", "NoSchedule"}}};
  for (const char* role : {"master", "coordinator", "evaluator"}) {
    spec[role]["template"]["spec"]["containers"] = {
        {{"name", "gaptrain"}, {"resources", {{"requests", {{"cpu", "100m"}}}}}}};
  }
  json low = base, high = base;
  low["metadata"]["name"] = "low-priority";
  low["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "batch";
  low["spec"]["training"]["maxUpdates"] = 3000;  // still running when preempted
  high["metadata"]["name"] = "high-priority";
  // No Kueue label: its trainers' PriorityClass gives the Workload its
  // priority, as Kueue's own integrations take it.
  high["spec"]["workers"]["template"]["spec"]["priorityClassName"] = "urgent-training";
  high["spec"]["training"]["maxUpdates"] = 300;
  auto workload_of = [&](const std::string& job) {
    kube::ObjectList list;
    kube::ListOptions options;
    options.label_selector = "gaptrain.io/job-name=" + job;
    EXPECT_TRUE(admin()->List(kube::kWorkloads, kNs, options, &list).ok());
    return list.items.size() == 1 ? list.items[0] : json();
  };
  auto phase_of = [&](const std::string& job) {
    return JobStatus(Get(kube::kTrainingJobs, kNs, job)).value("phase", "");
  };
  auto pods_of = [&](const std::string& job, const std::string& role) {
    return Pods(kNs, "gaptrain.io/job-name=" + job +
                         (role.empty() ? "" : ",gaptrain.io/replica-type=" + role));
  };
  auto create = [&](const kube::Resource& resource, const std::string& ns, const json& object) {
    const Status created = admin()->Create(resource, ns, object, nullptr);
    EXPECT_TRUE(created.ok()) << created.ToString();
  };
  create(kube::kWorkloadPriorityClasses, "",
         {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
          {"kind", "WorkloadPriorityClass"},
          {"metadata", {{"name", "batch"}}},
          {"value", 100}});
  create(kube::kPriorityClasses, "",
         {{"apiVersion", "scheduling.k8s.io/v1"},
          {"kind", "PriorityClass"},
          {"metadata", {{"name", "urgent-training"}}},
          {"value", 10000}});

  // No queue yet: the job waits, with its Workload and no pod.
  const Clock::time_point start = Clock::now();
  create(kube::kTrainingJobs, kNs, low);
  job_ = "low-priority";
  json workload;
  ASSERT_TRUE(Eventually([&] { return (workload = workload_of(job_)).is_object(); }, seconds(30)))
      << Diagnostics();
  ASSERT_TRUE(Eventually([&] { return phase_of(job_) == "Queued"; }, seconds(30)))
      << Diagnostics();
  EXPECT_TRUE(pods_of(job_, "").empty());
  EXPECT_EQ(workload["spec"].value("queueName", ""), "team-queue") << workload.dump(2);
  EXPECT_EQ(workload["spec"].value("priority", 0), 100) << workload.dump(2);
  ASSERT_EQ(workload["spec"]["podSets"].size(), 4u) << workload.dump(2);

  // The node carries both flavors' labels; a ClusterQueue with room for
  // one such job: 1.5 times its trainers' CPU on spot, 1.5 times the rest's
  // on on-demand.
  const double trainers_cpu = WorkloadCpu(workload, true);
  const double others_cpu = WorkloadCpu(workload, false);
  ASSERT_GT(trainers_cpu, 0) << workload.dump(2);
  ASSERT_GT(others_cpu, 0) << workload.dump(2);
  constexpr kube::Resource kNodes{"", "v1", "nodes", "Node", false, ""};
  kube::ObjectList nodes;
  ASSERT_TRUE(admin()->List(kNodes, "", kube::ListOptions(), &nodes).ok());
  ASSERT_EQ(nodes.items.size(), 1u);
  s = admin()->MergePatch(kNodes, "", nodes.items[0]["metadata"].value("name", ""),
                          {{"metadata",
                            {{"labels",
                              {{"gaptrain.test/on-demand", "true"}, {"gaptrain.test/spot", "true"}}}}}},
                          nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  create(kube::kResourceFlavors, "",
         {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
          {"kind", "ResourceFlavor"},
          {"metadata", {{"name", "on-demand"}}},
          {"spec", {{"nodeLabels", {{"gaptrain.test/on-demand", "true"}}}}}});
  create(kube::kResourceFlavors, "",
         {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
          {"kind", "ResourceFlavor"},
          {"metadata", {{"name", "spot"}}},
          {"spec",
           {{"nodeLabels", {{"gaptrain.test/spot", "true"}}},
            {"nodeTaints",
             {{{"key", "gaptrain.test/spot"}, {"value", "true"}, {"effect", "NoSchedule"}}}}}}});
  auto flavor = [&](const char* name, double cpu) {
    return json{{"name", name},
                {"resources",
                 {{{"name", "cpu"}, {"nominalQuota", std::to_string(int(cpu * 1500)) + "m"}},
                  {{"name", "memory"}, {"nominalQuota", "1000Gi"}}}}};
  };
  create(kube_testing::kClusterQueues, "",
         {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
          {"kind", "ClusterQueue"},
          {"metadata", {{"name", "research"}}},
          {"spec",
           {{"namespaceSelector", json::object()},
            {"preemption", {{"withinClusterQueue", "LowerPriority"}}},
            {"resourceGroups",
             {{{"coveredResources", {"cpu", "memory"}},
               {"flavors", {flavor("spot", trainers_cpu), flavor("on-demand", others_cpu)}}}}}}}});
  create(kube_testing::kLocalQueues, kNs,
         {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
          {"kind", "LocalQueue"},
          {"metadata", {{"name", "team-queue"}}},
          {"spec", {{"clusterQueue", "research"}}}});
  const Clock::time_point queue_made = Clock::now();
  const std::chrono::system_clock::time_point queue_made_wall = std::chrono::system_clock::now();

  // Admitted: it runs, trainers on spot, the rest on on-demand.
  ASSERT_TRUE(Eventually([&] { return phase_of(job_) == "Running"; }, seconds(90)))
      << Diagnostics();
  const Clock::time_point low_running = Clock::now();
  EXPECT_EQ(EventReasons().count("Admitted"), 1u);
  for (const char* role : {"trainer", "master", "coordinator", "evaluator"}) {
    const bool spot = std::string(role) == "trainer";
    const std::vector<json> pods = pods_of(job_, role);
    EXPECT_EQ(pods.size(), spot ? 2u : 1u) << role;
    for (const json& pod : pods) {
      const json selector = pod["spec"].value("nodeSelector", json::object());
      EXPECT_EQ(selector.contains("gaptrain.test/spot"), spot) << pod.dump(2);
      EXPECT_EQ(selector.contains("gaptrain.test/on-demand"), !spot) << pod.dump(2);
      EXPECT_FALSE(pod["metadata"]["labels"].contains("kueue.x-k8s.io/queue-name"));
    }
  }
  const json claim_before = Get(kube::kPersistentVolumeClaims, kNs, job_ + "-checkpoints");
  ASSERT_TRUE(claim_before.is_object());

  // The urgent job: Kueue preempts the first, whose pods stop and whose
  // quota is given back; it waits with Kueue's reason, its volumes kept.
  create(kube::kTrainingJobs, kNs, high);
  ASSERT_TRUE(Eventually([&] { return EventReasons().count("Evicted") >= 1; }, seconds(60)))
      << Diagnostics() << workload_of(job_).dump(2);
  const json high_workload = workload_of("high-priority");
  ASSERT_TRUE(high_workload.is_object());
  EXPECT_EQ(high_workload["spec"].value("priority", 0), 10000) << high_workload.dump(2);
  EXPECT_EQ(high_workload["spec"].value("priorityClassRef", json()),
            json({{"group", "scheduling.k8s.io"}, {"kind", "PriorityClass"},
                  {"name", "urgent-training"}}))
      << high_workload.dump(2);
  const Clock::time_point preempted = Clock::now();
  json waiting;
  ASSERT_TRUE(Eventually(
      [&] {
        waiting = Job();
        for (const json& c : JobStatus(waiting).value("conditions", json::array())) {
          if (c.value("type", "") == "Admitted" &&
              c.value("message", "").find("insufficient") != std::string::npos) {
            return JobStatus(waiting).value("phase", "") == "Queued" && pods_of(job_, "").empty();
          }
        }
        return false;
      },
      seconds(90)))
      << waiting.dump(2) << workload_of(job_).dump(2);
  const json low_workload = workload_of(job_);
  EXPECT_FALSE(low_workload.value("status", json::object()).contains("admission"))
      << low_workload.dump(2);
  EXPECT_EQ(WorkloadCondition(low_workload, "Requeued"), "True") << low_workload.dump(2);
  EXPECT_EQ(Get(kube::kPersistentVolumeClaims, kNs, job_ + "-checkpoints")["metadata"]["uid"],
            claim_before["metadata"]["uid"]);

  // The urgent job runs to the end and gives its quota back...
  job_ = "high-priority";
  json job;
  ASSERT_NO_FATAL_FAILURE(AwaitSucceeded(seconds(240), &job));
  ASSERT_TRUE(Eventually([&] { return WorkloadCondition(workload_of(job_), "Finished") == "True"; },
                         seconds(30)))
      << workload_of(job_).dump(2);
  const Clock::time_point high_done = Clock::now();
  // ...and the first is admitted again, resumes from its checkpoints and
  // finishes.
  job_ = "low-priority";
  ASSERT_NO_FATAL_FAILURE(AwaitSucceeded(seconds(300), &job));
  const json& status = JobStatus(job);
  EXPECT_EQ(status.value("failures", -1), 0) << status.dump(2);
  EXPECT_GE(Number(status, {"progress", "modelVersion"}), 3000) << status.dump(2);
  EXPECT_EQ(EventReasons().count("Admitted"), 2u);
  ASSERT_TRUE(Eventually([&] { return WorkloadCondition(workload_of(job_), "Finished") == "True"; },
                         seconds(30)));
  ExpectOperatorWithinItsPermissions();
  // Nothing ran unadmitted, by the API server's audit log: the first job's
  // first pod was written after its queue existed, and the urgent job's
  // only after the operator gave the preempted job's quota back (its first
  // Workload status patch), which Kueue admitted the urgent job on.
  using WallTime = std::chrono::system_clock::time_point;
  std::optional<WallTime> first_low_pod, first_high_pod, low_quota_returned;
  auto earliest = [](std::optional<WallTime>* at, WallTime t) {
    if (!*at || t < **at) *at = t;
  };
  for (const AuditRecord& r : OperatorRequests()) {
    if (r.code >= 300) continue;
    if (r.resource == "pods" && r.subresource.empty() && (r.verb == "patch" || r.verb == "create")) {
      if (r.name.rfind("low-priority-", 0) == 0) earliest(&first_low_pod, r.received);
      if (r.name.rfind("high-priority-", 0) == 0) earliest(&first_high_pod, r.received);
    }
    if (r.resource == "workloads" && r.subresource == "status" &&
        r.name.rfind("trainingjob-low-priority-", 0) == 0) {
      earliest(&low_quota_returned, r.received);
    }
  }
  ASSERT_TRUE(first_low_pod && first_high_pod && low_quota_returned);
  EXPECT_GT(*first_low_pod, queue_made_wall);
  EXPECT_GT(*first_high_pod, *low_quota_returned);
  // Every Kueue permission the operator declares was used (the operator
  // process test runs without Kueue): a server-side apply's "create" is
  // logged as "patch".
  std::set<kube::RbacPermission> used;
  for (const AuditRecord& r : OperatorRequests()) {
    used.insert(RequestPermission(r.group, r.resource, r.subresource, r.verb));
  }
  for (const kube::RbacPermission& p : OperatorPermissions()) {
    if ((p.group != "kueue.x-k8s.io" && p.group != "scheduling.k8s.io") ||
        (p.resource == "workloads" && p.verb == "create")) {
      continue;
    }
    EXPECT_EQ(used.count(p), 1u) << "declared but never used: " << p.resource << " " << p.verb;
  }
  std::printf("operator e2e Kueue: the low-priority job admitted and Running %.1f s after its "
              "queue was made (%.1f s after apply); preempted by the urgent job, which "
              "Succeeded %.1f s later; the first, admitted again, Succeeded %.1f s after that "
              "(%.1f s in all)\n",
              Seconds(low_running - queue_made), Seconds(low_running - start),
              Seconds(high_done - preempted), Seconds(Clock::now() - high_done),
              Seconds(Clock::now() - start));
}

}  // namespace
}  // namespace gaptrain
