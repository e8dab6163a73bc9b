// LocalNode on a real control plane (operator/envtest: etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler), with pods
// made by hand through the API (no operator): the scheduler binds them to
// the node, which runs them as real processes in network namespaces of
// their own, provisions PersistentVolumes for claims and writes their
// status. One control plane and one node for the whole binary (the tests
// that stop the node start it again, as the same Node), a namespace per
// test. Skips, with the reason, where the envtest binaries are missing or
// namespaces cannot be made (fails instead under CI=true).

#include "operator/testing/local_node.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "operator/envtest/api_resources.h"
#include "operator/envtest/control_plane.h"
#include "operator/testing/pod_network.h"
#include "services/net/http_client.h"
#include "services/testing/missing_requirement.h"
#include "services/testing/test_files.h"
#include "services/testing/test_processes.h"
#include "services/testing/testdata_dir.h"

namespace gaptrain {
namespace kube_testing {
namespace {

using nlohmann::json;

constexpr std::chrono::seconds kWait{30};
constexpr char kServiceAccountDir[] = "/var/run/secrets/kubernetes.io/serviceaccount";

json PodObject(const std::string& name, const std::vector<std::string>& command) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"restartPolicy", "Never"},
            {"containers", json::array({{{"name", "main"},
                                         {"image", "debian:12"},
                                         {"command", command}}})}}}};
}

// A python3 program as a container command.
json PythonPod(const std::string& name, const std::string& program) {
  return PodObject(name, {"python3", "-u", "-c", program});
}

json SecretObject(const std::string& name, const json& string_data) {
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata", {{"name", name}}},
          {"stringData", string_data}};
}

json ConfigMapObject(const std::string& name, const json& data) {
  return {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", name}}},
          {"data", data}};
}

json ClaimObject(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "PersistentVolumeClaim"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"accessModes", {"ReadWriteOnce"}},
            {"resources", {{"requests", {{"storage", "1Gi"}}}}}}}};
}

json& MainContainer(json* pod) { return (*pod)["spec"]["containers"][0]; }

const json* Condition(const json& pod, const std::string& type) {
  if (!pod.contains("status") || !pod["status"].contains("conditions")) return nullptr;
  for (const json& c : pod["status"]["conditions"]) {
    if (c.value("type", "") == type) return &c;
  }
  return nullptr;
}

std::string Phase(const json* pod) {
  return pod == nullptr ? "" : pod->value("status", json::object()).value("phase", "");
}

bool IsReady(const json* pod) {
  const json* ready = pod == nullptr ? nullptr : Condition(*pod, "Ready");
  return ready != nullptr && (*ready)["status"] == "True";
}

// The container's terminated state; {} when it has none.
json Terminated(const json& pod) {
  const json::json_pointer terminated("/status/containerStatuses/0/state/terminated");
  return pod.contains(terminated) ? pod.at(terminated) : json::object();
}

// The output of `ip ARGS...`.
std::string IpOutput(const std::vector<std::string>& args) {
  std::string command = access("/usr/sbin/ip", X_OK) == 0 ? "/usr/sbin/ip" : "/sbin/ip";
  for (const std::string& a : args) command += " " + a;
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  pclose(pipe);
  return out;
}

bool ProcessGone(pid_t pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

// "ExitCodesDecideThePhase" -> "exit-codes-decide-the-phase" (a DNS label).
std::string NamespaceFor(const std::string& test_name) {
  std::string ns;
  for (char c : test_name) {
    if (std::isupper(static_cast<unsigned char>(c)) && !ns.empty()) ns += '-';
    ns += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  ns = ns.substr(0, 63);
  while (!ns.empty() && ns.back() == '-') ns.pop_back();
  return ns;
}

class LocalNodeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    envtest::ControlPlane::Options options;
    options.work_dir = TestTempDir("cluster");
    options.controller_manager = true;
    options.scheduler = true;
    cluster_status_ = new Status(envtest::ControlPlane::Start(options, &cluster_));
    node_status_ = new Status();
    if (!cluster_status_->ok()) return;
    node_dir_ = new std::string(TestTempDir("node"));
    *node_status_ = StartNode();
  }

  static void TearDownTestSuite() {
    node_.reset();
    cluster_.reset();
    delete cluster_status_;
    delete node_status_;
    delete node_dir_;
  }

  // The shared node, (re)started: the same Node, so the scheduler's choice
  // does not change.
  static Status StartNode() {
    LocalNode::Options options;
    options.work_dir = *node_dir_;
    options.binaries = {{"gaptrain-coordinator", "services/coordinator/gaptrain-coordinator"}};
    options.extra_env = {{"GAPTRAIN_TEST_NODE", "1"}};
    options.api_service_host = envtest::kServiceIp;
    options.api_service_port = cluster_->port();
    kube::ClusterConfig config;
    config.server = cluster_->url();
    config.ca_pem = cluster_->ca_pem();
    config.token = cluster_->admin_token();
    node_.reset();
    return LocalNode::Start(config, options, &node_);
  }

  void SetUp() override {
    if (cluster_status_->code() == Status::Code::kNotFound) {
      GAPTRAIN_SKIP_OR_FAIL_IN_CI(cluster_status_->message());
    }
    ASSERT_TRUE(cluster_status_->ok()) << cluster_status_->ToString();
    if (node_status_->code() == Status::Code::kPermissionDenied) {
      GAPTRAIN_SKIP_OR_FAIL_IN_CI(node_status_->message());
    }
    ASSERT_TRUE(node_status_->ok()) << node_status_->ToString();
    ASSERT_NE(node_, nullptr) << "an earlier test could not restart the node";
    ns_ = NamespaceFor(::testing::UnitTest::GetInstance()->current_test_info()->name());
    const Status created = cluster_->CreateNamespace(ns_);
    ASSERT_TRUE(created.ok()) << created.ToString();
    // The API refuses pods until the controller manager has made the
    // namespace's default ServiceAccount.
    ASSERT_TRUE(Eventually(
        [&] {
          json account;
          return admin()->Get(envtest::kServiceAccounts, ns_, "default", &account).ok();
        },
        kWait));
  }

  void TearDown() override {
    // The namespace controller deletes what the test left (the node stops
    // its pods); nothing waits for it.
    if (!ns_.empty()) admin()->Delete(envtest::kNamespaces, "", ns_, kube::DeleteOptions());
  }

  static kube::Client* admin() { return cluster_->admin(); }

  void Create(const kube::Resource& resource, const json& object) {
    const Status created = admin()->Create(resource, ns_, object, nullptr);
    ASSERT_TRUE(created.ok()) << created.ToString();
  }
  void CreatePod(const json& pod) { Create(kube::kPods, pod); }

  void DeletePod(const std::string& name, std::optional<int64_t> grace_seconds = std::nullopt) {
    kube::DeleteOptions options;
    options.grace_period_seconds = grace_seconds;
    const Status deleted = admin()->Delete(kube::kPods, ns_, name, options);
    ASSERT_TRUE(deleted.ok()) << deleted.ToString();
  }

  // Waits until `predicate` holds for pod `name` (null while absent);
  // *last gets the pod as last seen.
  bool WaitPod(const std::string& name, const std::function<bool(const json*)>& predicate,
               json* last = nullptr) {
    json seen;
    const bool held = Eventually(
        [&] {
          const Status got = admin()->Get(kube::kPods, ns_, name, &seen);
          if (!got.ok()) seen = json();
          return (got.ok() || kube::IsNotFound(got)) && predicate(got.ok() ? &seen : nullptr);
        },
        kWait);
    if (last != nullptr) *last = seen;
    return held;
  }

  bool WaitFinished(const std::string& name, json* pod) {
    return WaitPod(
        name, [](const json* p) { return Phase(p) == "Succeeded" || Phase(p) == "Failed"; }, pod);
  }

  bool WaitRunning(const std::string& name, json* pod = nullptr) {
    return WaitPod(name, [](const json* p) { return Phase(p) == "Running"; }, pod);
  }

  // Waits until the pod's log holds `text`. Wait for whole lines: under
  // `python3 -u` a print writes its text and its newline separately, and a
  // signal between the two loses the newline.
  bool WaitLog(const std::string& name, const std::string& text) {
    std::string log;
    auto logged = [&] {
      return node_->Logs(ns_, name, &log).ok() && log.find(text) != std::string::npos;
    };
    if (Eventually(logged, kWait)) return true;
    ADD_FAILURE() << "pod " << name << " never logged \"" << text << "\"; log:\n" << log;
    return false;
  }

  // Starts pod `name`, which logs its pid and sleeps; the pid, or 0.
  pid_t RunPodTellingItsPid(const std::string& name) {
    CreatePod(PythonPod(name, "import os, time\nprint(os.getpid(), flush=True)\ntime.sleep(60)\n"));
    if (!WaitLog(name, "\n")) return 0;
    return std::stoi(Log(name));
  }

  std::string Log(const std::string& name) {
    std::string log;
    EXPECT_TRUE(node_->Logs(ns_, name, &log).ok());
    return log;
  }

  // Every change to pod `name` from now until it is DELETED (the server
  // ends the watch after kWait).
  std::unique_ptr<kube::WatchStream> WatchPod(const std::string& name) {
    json pod;
    EXPECT_TRUE(admin()->Get(kube::kPods, ns_, name, &pod).ok());
    kube::WatchOptions options;
    options.resource_version = pod["metadata"].value("resourceVersion", "");
    options.field_selector = "metadata.name=" + name;
    options.timeout_seconds = static_cast<int>(kWait.count());
    options.allow_bookmarks = false;
    std::unique_ptr<kube::WatchStream> watch;
    const Status started = admin()->Watch(kube::kPods, ns_, options, &watch);
    EXPECT_TRUE(started.ok()) << started.ToString();
    return watch;
  }
  static std::vector<kube::WatchEvent> EventsUntilDeleted(kube::WatchStream* watch) {
    std::vector<kube::WatchEvent> events;
    kube::WatchEvent event;
    while (watch != nullptr && watch->Next(&event)) {
      events.push_back(event);
      if (event.type == kube::WatchEvent::Type::kDeleted) break;
    }
    return events;
  }

  static std::unique_ptr<envtest::ControlPlane> cluster_;
  static std::unique_ptr<LocalNode> node_;
  static Status* cluster_status_;
  static Status* node_status_;
  static std::string* node_dir_;
  std::string ns_;
};

std::unique_ptr<envtest::ControlPlane> LocalNodeTest::cluster_;
std::unique_ptr<LocalNode> LocalNodeTest::node_;
Status* LocalNodeTest::cluster_status_;
Status* LocalNodeTest::node_status_;
std::string* LocalNodeTest::node_dir_;

TEST_F(LocalNodeTest, ExitCodesDecideThePhase) {
  CreatePod(PodObject("fails", {"sh", "-c", "exit 3"}));
  CreatePod(PodObject("succeeds", {"sh", "-c", "echo hello from $HOSTNAME"}));
  json pod;
  ASSERT_TRUE(WaitFinished("fails", &pod)) << pod.dump(2);
  EXPECT_EQ(Phase(&pod), "Failed");
  EXPECT_EQ(Terminated(pod)["exitCode"], 3);
  EXPECT_EQ(Terminated(pod)["reason"], "Error");
  EXPECT_EQ(pod["spec"]["nodeName"], "local-node");  // kube-scheduler's doing
  EXPECT_EQ((*Condition(pod, "PodScheduled"))["status"], "True");
  EXPECT_EQ((*Condition(pod, "Initialized"))["status"], "True");
  EXPECT_EQ((*Condition(pod, "Ready"))["reason"], "PodCompleted");
  EXPECT_EQ(pod["status"]["hostIP"], node_->host_ip());
  const std::string ip = pod["status"]["podIP"];
  EXPECT_EQ(ip.substr(0, ip.rfind('.')),
            node_->subnet().substr(0, node_->subnet().rfind('.')));
  EXPECT_EQ(pod["status"]["podIPs"][0]["ip"], ip);
  EXPECT_FALSE(pod["status"]["startTime"].get<std::string>().empty());
  EXPECT_FALSE(Terminated(pod)["startedAt"].get<std::string>().empty());

  ASSERT_TRUE(WaitFinished("succeeds", &pod));
  EXPECT_EQ(Phase(&pod), "Succeeded");
  EXPECT_EQ(Terminated(pod)["exitCode"], 0);
  EXPECT_EQ(Terminated(pod)["reason"], "Completed");
  EXPECT_EQ(Log("succeeds"), "hello from succeeds\n");
  EXPECT_EQ(node_->LogPath(ns_, "succeeds").rfind(*node_dir_ + "/logs/" + ns_ + "_succeeds_", 0),
            0u);

  // A command that cannot be executed fails the pod as containerd does.
  CreatePod(PodObject("missing", {"no-such-command"}));
  ASSERT_TRUE(WaitFinished("missing", &pod));
  EXPECT_EQ(Phase(&pod), "Failed");
  EXPECT_EQ(Terminated(pod)["exitCode"], 128);
  EXPECT_EQ(Terminated(pod)["reason"], "StartError");
  EXPECT_NE(Terminated(pod)["message"].get<std::string>().find("executable file not found"),
            std::string::npos);
}

// restartPolicy Always (the default) is accepted, and the container runs
// once: its exit ends the pod.
TEST_F(LocalNodeTest, RestartPolicyAlwaysRunsTheContainerOnce) {
  json pod = PodObject("always", {"sh", "-c", "echo once"});
  pod["spec"].erase("restartPolicy");
  CreatePod(pod);
  json done;
  ASSERT_TRUE(WaitFinished("always", &done)) << done.dump(2);
  EXPECT_EQ(done["spec"]["restartPolicy"], "Always");
  EXPECT_EQ(Phase(&done), "Succeeded");
  EXPECT_EQ(Log("always"), "once\n");
}

TEST_F(LocalNodeTest, EnvironmentIsExpandedAndFieldRefsResolved) {
  Create(kube::kSecrets, SecretObject("creds", {{"password", "s3cret"}}));
  Create(kube::kConfigMaps, ConfigMapObject("settings", {{"LEVEL", "debug"}}));
  json pod = PodObject("env", {"sh", "-c"});
  json& c = MainContainer(&pod);
  c["args"] = {"echo \"$GREETING|$ESCAPED|$(POD_NAME)|$POD_NAMESPACE|$NODE|$POD_IP|$PASSWORD|"
               "$CFG_LEVEL|$HOSTNAME|$GAPTRAIN_TEST_NODE|$(pwd)\"; echo \"$PATH\""};
  c["workingDir"] = "/tmp";
  c["envFrom"] = {{{"prefix", "CFG_"}, {"configMapRef", {{"name", "settings"}}}}};
  c["env"] = {
      {{"name", "NAME"}, {"value", "world"}},
      {{"name", "GREETING"}, {"value", "hello $(NAME) $(UNDEFINED)"}},
      {{"name", "ESCAPED"}, {"value", "$$(NAME)"}},
      {{"name", "POD_NAME"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}},
      {{"name", "POD_NAMESPACE"},
       {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.namespace"}}}}}},
      {{"name", "NODE"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "spec.nodeName"}}}}}},
      {{"name", "POD_IP"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "status.podIP"}}}}}},
      {{"name", "PASSWORD"},
       {"valueFrom", {{"secretKeyRef", {{"name", "creds"}, {"key", "password"}}}}}}};
  CreatePod(pod);
  json done;
  ASSERT_TRUE(WaitFinished("env", &done));
  ASSERT_EQ(Phase(&done), "Succeeded") << Log("env");
  const std::string ip = done["status"]["podIP"];
  EXPECT_EQ(Log("env"), "hello world $(UNDEFINED)|$(NAME)|env|" + ns_ + "|local-node|" + ip +
                            "|s3cret|debug|env|1|/tmp\n" + *node_dir_ +
                            "/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n");
}

TEST_F(LocalNodeTest, MissingSecretKeepsThePodWaitingUntilItExists) {
  json pod = PodObject("waits", {"sh", "-c", "echo $TOKEN"});
  MainContainer(&pod)["env"] = {
      {{"name", "TOKEN"}, {"valueFrom", {{"secretKeyRef", {{"name", "late"}, {"key", "t"}}}}}}};
  CreatePod(pod);
  json seen;
  ASSERT_TRUE(WaitPod(
      "waits",
      [](const json* p) {
        return p != nullptr && Phase(p) == "Pending" && p->contains("status") &&
               (*p)["status"].contains("containerStatuses") &&
               (*p)["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] ==
                   "CreateContainerConfigError";
      },
      &seen))
      << seen.dump(2);
  EXPECT_EQ(seen["status"]["containerStatuses"][0]["state"]["waiting"]["message"],
            "secret \"late\" not found");
  Create(kube::kSecrets, SecretObject("late", {{"t", "arrived"}}));
  ASSERT_TRUE(WaitFinished("waits", &seen));
  EXPECT_EQ(Phase(&seen), "Succeeded");
  EXPECT_EQ(Log("waits"), "arrived\n");
}

TEST_F(LocalNodeTest, SecretAndConfigMapVolumesAreReadOnlyFiles) {
  Create(kube::kSecrets, SecretObject("job-token", {{"token", "abc123"}}));
  Create(kube::kConfigMaps, ConfigMapObject("job-config", {{"job.yaml", "kind: TrainingJob\n"}}));
  // Mountpoints that do not exist are made on the host (and left there):
  // keep them in the test's directory. The config map is mounted inside the
  // emptyDir, which must therefore be mounted first.
  const std::string dir = TestDir("mnt");
  const std::string secret_path = dir + "/run/gaptrain";
  const std::string scratch_path = dir + "/scratch";
  const std::string config_path = scratch_path + "/etc/gaptrain";
  json pod = PodObject(
      "volumes",
      {"sh", "-c",
       "cat " + secret_path + "/token " + config_path + "/job.yaml; stat -c %a " + secret_path +
           "/token; touch " + config_path + "/new 2>/dev/null && echo writable || echo "
           "read-only; echo scratch > " + scratch_path + "/file && cat " + scratch_path + "/file"});
  pod["spec"]["volumes"] = {{{"name", "token"}, {"secret", {{"secretName", "job-token"}}}},
                            {{"name", "config"}, {"configMap", {{"name", "job-config"}}}},
                            {{"name", "scratch"}, {"emptyDir", json::object()}}};
  MainContainer(&pod)["volumeMounts"] = {
      {{"name", "token"}, {"mountPath", secret_path}, {"readOnly", true}},
      {{"name", "config"}, {"mountPath", config_path}},
      {{"name", "scratch"}, {"mountPath", scratch_path}}};
  CreatePod(pod);
  json done;
  ASSERT_TRUE(WaitFinished("volumes", &done));
  EXPECT_EQ(Phase(&done), "Succeeded") << done.dump(2);
  EXPECT_EQ(Log("volumes"), "abc123kind: TrainingJob\n644\nread-only\nscratch\n");
  EXPECT_FALSE(PathExists(scratch_path + "/file"));  // the host sees the empty mountpoint
}

// The API server gives every pod the kube-api-access-* projected volume:
// a token of its ServiceAccount (TokenRequest), the cluster's CA (the
// kube-root-ca.crt ConfigMap) and its namespace.
TEST_F(LocalNodeTest, ServiceAccountVolumeHoldsTokenCaAndNamespace) {
  const std::string out = TestDir("out");
  const std::string sa = kServiceAccountDir;
  json pod = PodObject("reader", {"sh", "-c",
                                  "cp " + sa + "/token " + sa + "/ca.crt " + sa + "/namespace " +
                                      out + "/ && stat -c %a " + sa + "/token"});
  pod["spec"]["volumes"] = {{{"name", "out"}, {"hostPath", {{"path", out}}}}};
  MainContainer(&pod)["volumeMounts"] = {{{"name", "out"}, {"mountPath", out}}};
  CreatePod(pod);
  json done;
  ASSERT_TRUE(WaitFinished("reader", &done)) << done.dump(2);
  ASSERT_EQ(Phase(&done), "Succeeded") << Log("reader");
  const json volumes = done["spec"]["volumes"];
  EXPECT_TRUE(std::any_of(volumes.begin(), volumes.end(), [](const json& v) {
    return v["name"].get<std::string>().rfind("kube-api-access-", 0) == 0;
  })) << volumes.dump(2);
  EXPECT_EQ(Log("reader"), "600\n");
  EXPECT_EQ(ReadRaw(out + "/namespace"), ns_);
  EXPECT_EQ(ReadRaw(out + "/ca.crt"), cluster_->ca_pem());
  // The token is the ServiceAccount's: the API server knows it as such.
  const std::string token = ReadRaw(out + "/token");
  ASSERT_FALSE(token.empty());
  std::unique_ptr<kube::Client> as_pod;
  ASSERT_TRUE(cluster_->NewClient(token, &as_pod).ok());
  json object;
  kube::ApiError error;
  const Status s = as_pod->Get(kube::kPods, ns_, "reader", &object, &error);
  EXPECT_EQ(error.http_status, 403) << s.ToString();
  EXPECT_NE(s.message().find("system:serviceaccount:" + ns_ + ":default"), std::string::npos)
      << s.ToString();
}

// In-cluster configuration works as on a cluster: KUBERNETES_SERVICE_HOST
// and _PORT, the mounted token and CA reach the API server, which answers
// as the pod's ServiceAccount.
TEST_F(LocalNodeTest, InClusterClientReachesTheApiServer) {
  Create(envtest::kRoles, {{"apiVersion", "rbac.authorization.k8s.io/v1"},
                           {"kind", "Role"},
                           {"metadata", {{"name", "read-pods"}}},
                           {"rules",
                            {{{"apiGroups", {""}},
                              {"resources", {"pods"}},
                              {"verbs", {"get"}}}}}});
  Create(envtest::kRoleBindings, {{"apiVersion", "rbac.authorization.k8s.io/v1"},
                                  {"kind", "RoleBinding"},
                                  {"metadata", {{"name", "default-reads-pods"}}},
                                  {"roleRef",
                                   {{"apiGroup", "rbac.authorization.k8s.io"},
                                    {"kind", "Role"},
                                    {"name", "read-pods"}}},
                                  {"subjects",
                                   {{{"kind", "ServiceAccount"},
                                     {"name", "default"},
                                     {"namespace", ns_}}}}});
  // As client-go's rest.InClusterConfig(); RBAC's cache may take a moment
  // to follow the binding.
  CreatePod(PythonPod("in-cluster", R"(
import json, os, ssl, time, urllib.error, urllib.request
d = "/var/run/secrets/kubernetes.io/serviceaccount/"
host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
print(host, port, os.environ["KUBERNETES_SERVICE_PORT_HTTPS"], os.environ["KUBERNETES_PORT"])
ns = open(d + "namespace").read()
request = urllib.request.Request(
    "https://%s:%s/api/v1/namespaces/%s/pods/%s" % (host, port, ns, os.environ["HOSTNAME"]),
    headers={"Authorization": "Bearer " + open(d + "token").read()})
context = ssl.create_default_context(cafile=d + "ca.crt")
deadline = time.time() + 20
while True:
    try:
        pod = json.load(urllib.request.urlopen(request, context=context, timeout=5))
        break
    except urllib.error.HTTPError as e:
        if e.code != 403 or time.time() > deadline:
            raise
        time.sleep(0.1)
print(pod["metadata"]["namespace"], pod["metadata"]["name"], pod["status"]["phase"])
)"));
  json done;
  ASSERT_TRUE(WaitFinished("in-cluster", &done)) << done.dump(2);
  EXPECT_EQ(Phase(&done), "Succeeded") << Log("in-cluster");
  const std::string port = std::to_string(cluster_->port());
  EXPECT_EQ(Log("in-cluster"), std::string(envtest::kServiceIp) + " " + port + " " + port +
                                   " tcp://" + envtest::kServiceIp + ":" + port + "\n" + ns_ +
                                   " in-cluster Running\n");
}

// The node provisions a PersistentVolume for the claim (a directory of its
// own), the controller manager binds them; the directory outlives the pods,
// and the volume goes when the claim does.
TEST_F(LocalNodeTest, ClaimIsBoundToAProvisionedVolumeThatOutlivesItsPods) {
  json claim;
  ASSERT_TRUE(admin()->Create(kube::kPersistentVolumeClaims, ns_, ClaimObject("checkpoints"),
                              &claim)
                  .ok());
  const std::string volume_name = "pvc-" + claim["metadata"]["uid"].get<std::string>();
  const std::string mount_path = TestDir("mnt") + "/var/lib/gaptrain/checkpoints";
  auto pod_with_claim = [&](const std::string& name, const std::string& script) {
    json pod = PodObject(name, {"sh", "-c", script});
    pod["spec"]["volumes"] = {
        {{"name", "data"}, {"persistentVolumeClaim", {{"claimName", "checkpoints"}}}}};
    MainContainer(&pod)["volumeMounts"] = {{{"name", "data"}, {"mountPath", mount_path}}};
    return pod;
  };
  CreatePod(pod_with_claim("writer", "echo step-42 > " + mount_path + "/ckpt"));
  json pod;
  ASSERT_TRUE(WaitFinished("writer", &pod)) << pod.dump(2);
  ASSERT_EQ(Phase(&pod), "Succeeded") << Log("writer");

  ASSERT_TRUE(admin()->Get(kube::kPersistentVolumeClaims, ns_, "checkpoints", &claim).ok());
  EXPECT_EQ(claim["status"]["phase"], "Bound");
  EXPECT_EQ(claim["status"]["capacity"]["storage"], "1Gi");
  EXPECT_EQ(claim["spec"]["volumeName"], volume_name);
  std::string dir;
  ASSERT_TRUE(node_->ClaimPath(ns_, "checkpoints", &dir).ok());
  EXPECT_EQ(dir, *node_dir_ + "/claims/" + ns_ + "/checkpoints-" +
                     claim["metadata"]["uid"].get<std::string>());
  json volume;
  ASSERT_TRUE(admin()->Get(envtest::kPersistentVolumes, "", volume_name, &volume).ok());
  EXPECT_EQ(volume["status"]["phase"], "Bound");
  EXPECT_EQ(volume["spec"]["hostPath"]["path"], dir);
  EXPECT_EQ(volume["spec"]["claimRef"]["name"], "checkpoints");
  EXPECT_EQ(volume["spec"]["claimRef"]["namespace"], ns_);
  EXPECT_EQ(volume["spec"]["capacity"]["storage"], "1Gi");
  EXPECT_EQ(ReadRaw(dir + "/ckpt"), "step-42\n");

  // A later pod sees what the earlier one and the host wrote.
  WriteRaw(dir + "/from-host", "hello\n");
  CreatePod(pod_with_claim("reader", "cat " + mount_path + "/ckpt " + mount_path + "/from-host"));
  EXPECT_FALSE(PathExists(mount_path + "/ckpt"));  // the host sees an empty mountpoint
  ASSERT_TRUE(WaitFinished("reader", &pod));
  EXPECT_EQ(Phase(&pod), "Succeeded");
  EXPECT_EQ(Log("reader"), "step-42\nhello\n");

  // The claim goes (once no pod uses it: the controller manager's
  // pvc-protection): its volume is Released, and the node deletes it; the
  // directory stays.
  DeletePod("writer");
  DeletePod("reader");
  ASSERT_TRUE(admin()
                  ->Delete(kube::kPersistentVolumeClaims, ns_, "checkpoints",
                           kube::DeleteOptions())
                  .ok());
  EXPECT_TRUE(Eventually(
      [&] {
        return kube::IsNotFound(
            admin()->Get(envtest::kPersistentVolumes, "", volume_name, &volume));
      },
      kWait))
      << volume.dump(2);
  EXPECT_EQ(ReadRaw(dir + "/ckpt"), "step-42\n");
}

// The scheduler leaves a pod whose claim does not exist yet Pending; once
// the claim is made (and bound to the node's volume) it runs.
TEST_F(LocalNodeTest, PodWaitsForItsClaim) {
  json pod = PodObject("early", {"true"});
  pod["spec"]["volumes"] = {
      {{"name", "data"}, {"persistentVolumeClaim", {{"claimName", "later"}}}}};
  CreatePod(pod);
  json seen;
  ASSERT_TRUE(WaitPod(
      "early",
      [](const json* p) {
        const json* c = p == nullptr ? nullptr : Condition(*p, "PodScheduled");
        return c != nullptr && (*c)["status"] == "False";
      },
      &seen));
  EXPECT_EQ((*Condition(seen, "PodScheduled"))["reason"], "Unschedulable");
  EXPECT_FALSE(seen["spec"].contains("nodeName"));
  Create(kube::kPersistentVolumeClaims, ClaimObject("later"));
  ASSERT_TRUE(WaitFinished("early", &seen)) << seen.dump(2);
  EXPECT_EQ(Phase(&seen), "Succeeded");
  EXPECT_EQ((*Condition(seen, "PodScheduled"))["status"], "True");
}

// Both pods listen on port 8080 in namespaces of their own; the client,
// created before the server and its Service exist, finds the server by the
// Service's name once its pod runs.
TEST_F(LocalNodeTest, PodsOwnTheirPortsAndFindEachOtherByServiceName) {
  CreatePod(PythonPod("client", R"(
import os, socket, time, urllib.request
mine = socket.socket()
mine.bind(("0.0.0.0", 8080))
mine.listen()
print("listening", flush=True)
ns = open("/var/run/secrets/kubernetes.io/serviceaccount/namespace").read()
deadline = time.time() + 25
while True:
    try:
        for name in ("server", "server.%s.svc.cluster.local" % ns):
            body = urllib.request.urlopen("http://%s:8080/" % name, timeout=2).read()
            print(name, "->", body.decode())
        break
    except Exception as e:
        if time.time() > deadline:
            raise
        time.sleep(0.05)
)"));
  ASSERT_TRUE(WaitLog("client", "listening"));
  Create(kube::kServices, {{"apiVersion", "v1"},
                           {"kind", "Service"},
                           {"metadata", {{"name", "server"}}},
                           {"spec",
                            {{"clusterIP", "None"},
                             {"publishNotReadyAddresses", true},
                             {"selector", {{"app", "server"}}},
                             {"ports", {{{"name", "http"}, {"port", 8080}}}}}}});
  json server = PythonPod("server", R"(
import http.server, socket
class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("hello from " + socket.gethostname()).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
http.server.HTTPServer(("0.0.0.0", 8080), Hello).serve_forever()
)");
  server["metadata"]["labels"] = {{"app", "server"}};
  CreatePod(server);
  json pod;
  ASSERT_TRUE(WaitFinished("client", &pod));
  EXPECT_EQ(Phase(&pod), "Succeeded") << Log("client");
  EXPECT_EQ(Log("client"), "listening\nserver -> hello from server\nserver." + ns_ +
                               ".svc.cluster.local -> hello from server\n");

  // The root namespace (where the operator runs) reaches the pod by its IP.
  ASSERT_TRUE(WaitRunning("server", &pod));
  HttpClientResponse response;
  const Status got = HttpGet(pod["status"]["podIP"], 8080, "/", 5, &response);
  ASSERT_TRUE(got.ok()) << got.ToString();
  EXPECT_EQ(response.body, "hello from server");
}

TEST_F(LocalNodeTest, GracefulDeleteRecordsTheProcessesOwnExitCode) {
  CreatePod(PythonPod("graceful", R"(
import signal, sys, time
def stop(signum, frame):
    print("got SIGTERM", flush=True)
    sys.exit(7)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
time.sleep(60)
)"));
  ASSERT_TRUE(WaitLog("graceful", "ready\n"));
  std::unique_ptr<kube::WatchStream> watch = WatchPod("graceful");
  DeletePod("graceful", 30);
  std::vector<kube::WatchEvent> events = EventsUntilDeleted(watch.get());
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back().type, kube::WatchEvent::Type::kDeleted);
  const json& last = events.back().object;  // as it was when it went
  EXPECT_EQ(Phase(&last), "Failed");
  EXPECT_EQ(Terminated(last)["exitCode"], 7);
  EXPECT_EQ(Terminated(last)["reason"], "Error");
  EXPECT_FALSE(Terminated(last).contains("signal"));
  EXPECT_EQ(Log("graceful"), "ready\ngot SIGTERM\n");
}

TEST_F(LocalNodeTest, ProcessIgnoringSigtermIsKilledAfterTheGracePeriod) {
  CreatePod(PythonPod("stubborn", R"(
import os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
time.sleep(60)
)"));
  ASSERT_TRUE(WaitLog("stubborn", "ready\n"));
  std::unique_ptr<kube::WatchStream> watch = WatchPod("stubborn");
  const auto start = std::chrono::steady_clock::now();
  DeletePod("stubborn", 1);
  std::vector<kube::WatchEvent> events = EventsUntilDeleted(watch.get());
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  ASSERT_GE(events.size(), 2u);
  ASSERT_EQ(events.back().type, kube::WatchEvent::Type::kDeleted);
  const json& last = events.back().object;
  EXPECT_EQ(Terminated(last)["exitCode"], 137);
  EXPECT_EQ(Terminated(last)["signal"], 9);
  EXPECT_EQ(Phase(&last), "Failed");
}

TEST_F(LocalNodeTest, ImmediateDeleteKillsTheProcess) {
  const pid_t pid = RunPodTellingItsPid("doomed");
  ASSERT_GT(pid, 0);
  ASSERT_FALSE(ProcessGone(pid));
  DeletePod("doomed", 0);
  EXPECT_TRUE(Eventually([&] { return ProcessGone(pid); }, kWait));
}

TEST_F(LocalNodeTest, KillContainerAndOutOfMemory) {
  CreatePod(PodObject("crash", {"sleep", "60"}));
  CreatePod(PodObject("oom", {"sleep", "60"}));
  ASSERT_TRUE(WaitRunning("crash"));
  ASSERT_TRUE(WaitRunning("oom"));
  ASSERT_TRUE(node_->KillContainer(ns_, "crash", SIGSEGV).ok());
  ASSERT_TRUE(node_->OutOfMemory(ns_, "oom").ok());
  json pod;
  ASSERT_TRUE(WaitFinished("crash", &pod));
  EXPECT_EQ(Phase(&pod), "Failed");
  EXPECT_EQ(Terminated(pod)["exitCode"], 128 + SIGSEGV);
  EXPECT_EQ(Terminated(pod)["signal"], SIGSEGV);
  EXPECT_EQ(Terminated(pod)["reason"], "Error");
  ASSERT_TRUE(WaitFinished("oom", &pod));
  EXPECT_EQ(Terminated(pod)["exitCode"], 137);
  EXPECT_EQ(Terminated(pod)["reason"], "OOMKilled");
  EXPECT_EQ(node_->KillContainer(ns_, "oom", SIGKILL).code(), Status::Code::kNotFound);
}

TEST_F(LocalNodeTest, NodeShutdownLooksAsRecorded) {
  std::ifstream recorded_file(RecordedK8sExchange("pod-status-disruption-target"));
  ASSERT_TRUE(recorded_file.good()) << "missing ../shared/k8s/recorded";
  const json recorded = json::parse(recorded_file)["response"]["body"]["status"];

  json pod = PodObject("spot", {"sleep", "60"});
  pod["spec"]["terminationGracePeriodSeconds"] = 5;
  CreatePod(pod);
  ASSERT_TRUE(WaitRunning("spot"));
  std::unique_ptr<kube::WatchStream> watch = WatchPod("spot");
  ASSERT_TRUE(node_->Preempt(ns_, "spot").ok());
  std::vector<kube::WatchEvent> events = EventsUntilDeleted(watch.get());
  ASSERT_GE(events.size(), 2u);
  ASSERT_EQ(events.back().type, kube::WatchEvent::Type::kDeleted);
  const json& last = events.back().object;
  EXPECT_EQ(Phase(&last), recorded["phase"]);
  const json* disruption = Condition(last, "DisruptionTarget");
  ASSERT_NE(disruption, nullptr) << last.dump(2);
  const json& expected = recorded["conditions"][0];
  for (const char* key : {"type", "status", "reason", "message"}) {
    EXPECT_EQ((*disruption)[key], expected[key]) << key;
  }
  const json& expected_terminated = recorded["containerStatuses"][0]["state"]["terminated"];
  EXPECT_EQ(Terminated(last)["exitCode"], expected_terminated["exitCode"]);  // 143: SIGTERM
  EXPECT_EQ(Terminated(last)["reason"], expected_terminated["reason"]);
  EXPECT_EQ(last["status"]["reason"], "Terminated");
}

TEST_F(LocalNodeTest, SchedulerPreemptionDeletesGracefully) {
  CreatePod(PodObject("victim", {"sleep", "60"}));
  ASSERT_TRUE(WaitRunning("victim"));
  std::unique_ptr<kube::WatchStream> watch = WatchPod("victim");
  ASSERT_TRUE(node_->Preempt(ns_, "victim", LocalNode::Disruption::kSchedulerPreemption).ok());
  std::vector<kube::WatchEvent> events = EventsUntilDeleted(watch.get());
  ASSERT_GE(events.size(), 2u);
  ASSERT_EQ(events.back().type, kube::WatchEvent::Type::kDeleted);
  const json& last = events.back().object;
  const json* disruption = Condition(last, "DisruptionTarget");
  ASSERT_NE(disruption, nullptr);
  EXPECT_EQ((*disruption)["reason"], "PreemptionByScheduler");
  EXPECT_EQ((*disruption)["message"],
            "default-scheduler: preempting to accommodate a higher priority pod");
  EXPECT_TRUE(last["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(Terminated(last)["exitCode"], 143);
}

TEST_F(LocalNodeTest, ReadyFollowsTheReadinessProbe) {
  const std::string flag_dir = TestDir("flags");
  const std::string mount_path = TestDir("mnt") + "/flags";
  json pod = PythonPod("probed", R"(
import http.server, os, sys
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        ok = self.path == "/healthz" and os.path.exists(sys.argv[1] + "/ready")
        self.send_response(200 if ok else 503)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("0.0.0.0", 9092), Health).serve_forever()
)");
  pod["spec"]["volumes"] = {{{"name", "flags"}, {"hostPath", {{"path", flag_dir}}}}};
  json& c = MainContainer(&pod);
  c["args"] = {mount_path};
  c["volumeMounts"] = {{{"name", "flags"}, {"mountPath", mount_path}}};
  c["ports"] = {{{"name", "metrics"}, {"containerPort", 9092}}};
  c["readinessProbe"] = {{"httpGet", {{"path", "/healthz"}, {"port", "metrics"}}},
                         {"periodSeconds", 1},
                         {"failureThreshold", 1}};
  CreatePod(pod);
  json seen;
  ASSERT_TRUE(WaitRunning("probed", &seen));
  EXPECT_FALSE(IsReady(&seen));
  EXPECT_EQ((*Condition(seen, "Ready"))["reason"], "ContainersNotReady");

  WriteRaw(flag_dir + "/ready", "");
  ASSERT_TRUE(WaitPod("probed", IsReady, &seen)) << seen.dump(2);
  EXPECT_EQ((*Condition(seen, "ContainersReady"))["status"], "True");
  EXPECT_EQ(seen["status"]["containerStatuses"][0]["ready"], true);

  ASSERT_EQ(unlink((flag_dir + "/ready").c_str()), 0);
  ASSERT_TRUE(WaitPod("probed", [](const json* p) { return p != nullptr && !IsReady(p); }));
}

TEST_F(LocalNodeTest, PodWithoutProbeIsReadyWhileRunning) {
  CreatePod(PodObject("plain", {"sleep", "60"}));
  json seen;
  ASSERT_TRUE(WaitPod("plain", IsReady, &seen));
  EXPECT_EQ(Phase(&seen), "Running");
  EXPECT_EQ(seen["status"]["containerStatuses"][0]["state"].contains("running"), true);
}

TEST_F(LocalNodeTest, FailingLivenessProbeKillsTheContainer) {
  json pod = PodObject("unhealthy", {"sleep", "60"});
  pod["spec"]["terminationGracePeriodSeconds"] = 1;
  MainContainer(&pod)["livenessProbe"] = {
      {"tcpSocket", {{"port", 9999}}}, {"periodSeconds", 1}, {"failureThreshold", 1}};
  CreatePod(pod);
  json seen;
  ASSERT_TRUE(WaitFinished("unhealthy", &seen));
  EXPECT_EQ(Phase(&seen), "Failed");
  EXPECT_EQ(Terminated(seen)["exitCode"], 143);
}

// A pod that replaces another of the same name is a new pod, with a new
// address.
TEST_F(LocalNodeTest, ReplacedPodGetsANewAddress) {
  CreatePod(PodObject("again", {"sleep", "60"}));
  json first;
  ASSERT_TRUE(WaitRunning("again", &first));
  DeletePod("again", 0);
  CreatePod(PodObject("again", {"sleep", "60"}));
  json second;
  ASSERT_TRUE(WaitPod(
      "again",
      [&](const json* p) {
        return Phase(p) == "Running" && (*p)["metadata"]["uid"] != first["metadata"]["uid"];
      },
      &second));
  EXPECT_NE(second["status"]["podIP"], first["status"]["podIP"]);
  const std::string ip = second["status"]["podIP"];
  EXPECT_EQ(ip.substr(0, ip.rfind('.')),
            node_->subnet().substr(0, node_->subnet().rfind('.')));
}

TEST_F(LocalNodeTest, StopLeavesNoProcessNamespaceLinkOrFile) {
  const pid_t pid = RunPodTellingItsPid("lingering");
  ASSERT_GT(pid, 0);
  const std::string prefix = node_->name_prefix();
  ASSERT_NE(IpOutput({"netns", "list"}).find(prefix), std::string::npos);
  ASSERT_NE(IpOutput({"link", "show"}).find(prefix), std::string::npos);

  node_->Stop();
  EXPECT_TRUE(ProcessGone(pid));
  EXPECT_EQ(IpOutput({"netns", "list"}).find(prefix), std::string::npos);
  EXPECT_EQ(IpOutput({"link", "show"}).find(prefix), std::string::npos);
  EXPECT_FALSE(PathExists(*node_dir_ + "/pods"));
  EXPECT_FALSE(PathExists(*node_dir_ + "/bin"));
  EXPECT_TRUE(PathExists(node_->LogPath(ns_, "lingering")));  // logs are kept
  // Stop() wrote nothing: the pod is Running as far as the API knows.
  json pod;
  ASSERT_TRUE(admin()->Get(kube::kPods, ns_, "lingering", &pod).ok());
  EXPECT_EQ(Phase(&pod), "Running");

  const Status restarted = StartNode();
  ASSERT_TRUE(restarted.ok()) << restarted.ToString();
}

// A node that comes back finds the containers of its running pods gone.
TEST_F(LocalNodeTest, RestartedNodeFailsThePodsThatWereRunning) {
  CreatePod(PodObject("orphan", {"sleep", "60"}));
  ASSERT_TRUE(WaitRunning("orphan"));
  const Status restarted = StartNode();
  ASSERT_TRUE(restarted.ok()) << restarted.ToString();
  json pod;
  ASSERT_TRUE(WaitFinished("orphan", &pod));
  EXPECT_EQ(Phase(&pod), "Failed");
  EXPECT_EQ(Terminated(pod)["exitCode"], 137);
  EXPECT_EQ(Terminated(pod)["reason"], "ContainerStatusUnknown");
  // The node runs new pods as before.
  CreatePod(PodObject("after", {"true"}));
  ASSERT_TRUE(WaitFinished("after", &pod));
  EXPECT_EQ(Phase(&pod), "Succeeded");
}

TEST_F(LocalNodeTest, StartRemovesWhatDeadProcessesLeft) {
  // The pid of a process that has exited names the leftovers.
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  int status;
  ASSERT_EQ(waitpid(dead, &status, 0), dead);
  std::string base36;
  for (uint64_t n = static_cast<uint64_t>(dead); n != 0; n /= 36) {
    base36.insert(base36.begin(), "0123456789abcdefghijklmnopqrstuvwxyz"[n % 36]);
  }
  const std::string stale = std::string(PodNetwork::NamePrefix()) + base36 + "-0";
  ASSERT_EQ(IpOutput({"netns", "add", stale + "-0"}), "");
  ASSERT_EQ(IpOutput({"link", "add", stale, "type", "bridge"}), "");
  ASSERT_NE(IpOutput({"netns", "list"}).find(stale + "-0"), std::string::npos);

  ASSERT_TRUE(PodNetwork::RemoveStale(TestDir("scratch")).ok());
  EXPECT_EQ(IpOutput({"netns", "list"}).find(stale), std::string::npos);
  EXPECT_EQ(IpOutput({"link", "show"}).find(stale), std::string::npos);
  // This process's own network is alive and stays.
  EXPECT_NE(IpOutput({"link", "show"}).find(node_->name_prefix()), std::string::npos);
}

TEST_F(LocalNodeTest, RunsTheRealCoordinatorBinary) {
  CreatePod(PodObject("coordinator", {"gaptrain-coordinator", "--help"}));
  json pod;
  ASSERT_TRUE(WaitFinished("coordinator", &pod));
  EXPECT_EQ(Phase(&pod), "Succeeded") << Log("coordinator");
  EXPECT_EQ(Log("coordinator").rfind("usage: gaptrain-coordinator", 0), 0u) << Log("coordinator");
}

// The coordinator as the operator runs it: job from a ConfigMap, token from
// a Secret, state on a claim, Ready by its /healthz, /status by pod IP.
TEST_F(LocalNodeTest, ServesTheRealCoordinatorAsTheOperatorWould) {
  Create(kube::kSecrets, SecretObject("mnist-token", {{"token", "0123456789abcdef"}}));
  Create(kube::kConfigMaps,
         ConfigMapObject("mnist-job", {{"job.yaml", R"(apiVersion: gaptrain.io/v1alpha1
kind: TrainingJob
metadata: {name: mnist, namespace: default}
spec:
  model: {builtin: mlp}
  data: {format: mnist-idx, path: /unused}
  training: {batchSize: 100, epochs: 1}
  workers: {replicas: 1}
)"}}));
  Create(kube::kPersistentVolumeClaims, ClaimObject("mnist-coordinator-state"));
  const std::string dir = TestDir("mnt");
  const std::string token_dir = dir + "/var/run/gaptrain";
  const std::string job_dir = dir + "/etc/gaptrain";
  const std::string state_dir = dir + "/var/lib/gaptrain/coordinator";
  json pod = PodObject("mnist-coordinator", {"gaptrain-coordinator"});
  pod["spec"]["volumes"] = {
      {{"name", "token"}, {"secret", {{"secretName", "mnist-token"}}}},
      {{"name", "job"}, {"configMap", {{"name", "mnist-job"}}}},
      {{"name", "state"}, {"persistentVolumeClaim", {{"claimName", "mnist-coordinator-state"}}}}};
  json& c = MainContainer(&pod);
  c["args"] = {"--job", job_dir + "/job.yaml", "--listen", "0.0.0.0:7071", "--http-port", "9091",
               "--token-file", token_dir + "/token", "--state-dir", state_dir,
               "--train-samples", "1000", "--master-timeout-seconds", "0"};
  c["volumeMounts"] = {{{"name", "token"}, {"mountPath", token_dir}, {"readOnly", true}},
                       {{"name", "job"}, {"mountPath", job_dir}, {"readOnly", true}},
                       {{"name", "state"}, {"mountPath", state_dir}}};
  c["ports"] = {{{"name", "grpc"}, {"containerPort", 7071}},
                {{"name", "metrics"}, {"containerPort", 9091}}};
  c["readinessProbe"] = {{"httpGet", {{"path", "/healthz"}, {"port", "metrics"}}},
                         {"periodSeconds", 1}};
  CreatePod(pod);
  json seen;
  ASSERT_TRUE(WaitPod("mnist-coordinator", IsReady, &seen))
      << seen.dump(2) << Log("mnist-coordinator");
  HttpClientResponse status;
  const Status got = HttpGet(seen["status"]["podIP"], 9091, "/status", 5, &status);
  ASSERT_TRUE(got.ok()) << got.ToString();
  EXPECT_EQ(json::parse(status.body)["jobName"], "mnist") << status.body;
}

// Checked before the node connects anywhere.
TEST(LocalNodeStartTest, RejectsBadOptions) {
  kube::ClusterConfig config;
  config.server = "https://127.0.0.1:1";
  std::unique_ptr<LocalNode> node;
  LocalNode::Options options;
  EXPECT_EQ(LocalNode::Start(config, options, &node).code(),
            Status::Code::kInvalidArgument);  // no work_dir
  options.work_dir = TestDir("node");
  options.binaries = {{"gaptrain-master", "/no/such/binary"}};
  const Status bad = LocalNode::Start(config, options, &node);
  EXPECT_EQ(bad.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(bad.message().find("/no/such/binary"), std::string::npos);
  options.binaries.clear();
  options.api_service_host = "10.96.0.1";  // without a port
  EXPECT_EQ(LocalNode::Start(config, options, &node).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(node, nullptr);
}

}  // namespace
}  // namespace kube_testing
}  // namespace gaptrain
