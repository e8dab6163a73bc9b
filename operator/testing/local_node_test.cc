// LocalNode against a FakeApiServer with hand-made pods (no operator):
// real processes in network namespaces of their own. Skips, with the
// reason, where namespaces cannot be made.

#include "operator/testing/local_node.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "operator/testing/fake_api_server.h"
#include "operator/testing/pod_network.h"
#include "services/common/http_client.h"
#include "services/testing/test_files.h"
#include "services/testing/testdata_dir.h"

namespace gaptrain {
namespace kube_testing {
namespace {

using nlohmann::json;

constexpr std::chrono::seconds kWait{30};
constexpr char kNs[] = "default";

json PodObject(const std::string& name, const std::vector<std::string>& command) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", kNs}}},
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
          {"metadata", {{"name", name}, {"namespace", kNs}}},
          {"stringData", string_data}};
}

json ConfigMapObject(const std::string& name, const json& data) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", name}, {"namespace", kNs}}},
          {"data", data}};
}

json ClaimObject(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "PersistentVolumeClaim"},
          {"metadata", {{"name", name}, {"namespace", kNs}}},
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

const json& Terminated(const json& pod) {
  return pod["status"]["containerStatuses"][0]["state"]["terminated"];
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

class LocalNodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(FakeApiServer::Start(FakeApiServer::Options(), &server_).ok());
    work_dir_ = TestDir("node");
    LocalNode::Options options;
    options.work_dir = work_dir_;
    options.binaries = {{"gaptrain-coordinator", "services/coordinator/gaptrain-coordinator"}};
    options.extra_env = {{"GAPTRAIN_TEST_NODE", "1"}};
    const Status started = LocalNode::Start(server_.get(), options, &node_);
    if (started.code() == Status::Code::kPermissionDenied) GTEST_SKIP() << started.message();
    ASSERT_TRUE(started.ok()) << started.ToString();
  }

  void TearDown() override {
    if (node_ != nullptr) node_->Stop();
  }

  void Create(const json& object) {
    const Status created = server_->Create(object);
    ASSERT_TRUE(created.ok()) << created.ToString();
  }

  // Waits until `predicate` holds for pod `name` (null while absent);
  // *last gets the pod as last seen.
  bool WaitPod(const std::string& name, const std::function<bool(const json*)>& predicate,
               json* last = nullptr) {
    return server_->WaitForObject("pods", kNs, name,
                                  [&](const json* pod) {
                                    if (last != nullptr) *last = pod == nullptr ? json() : *pod;
                                    return predicate(pod);
                                  },
                                  kWait);
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
    const auto deadline = std::chrono::steady_clock::now() + kWait;
    std::string log;
    while (std::chrono::steady_clock::now() < deadline) {
      if (node_->Logs(kNs, name, &log).ok() && log.find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "pod " << name << " never logged \"" << text << "\"; log:\n" << log;
    return false;
  }

  // Starts pod `name`, which logs its pid and sleeps; the pid, or 0.
  pid_t RunPodTellingItsPid(const std::string& name) {
    Create(PythonPod(name, "import os, time\nprint(os.getpid(), flush=True)\ntime.sleep(60)\n"));
    if (!WaitLog(name, "\n")) return 0;
    return std::stoi(Log(name));
  }

  std::string Log(const std::string& name) {
    std::string log;
    EXPECT_TRUE(node_->Logs(kNs, name, &log).ok());
    return log;
  }

  // Every event of pod `name` from now until it is DELETED.
  std::unique_ptr<ObjectStore::Watch> WatchPod(const std::string& name) {
    std::unique_ptr<ObjectStore::Watch> watch;
    EXPECT_TRUE(server_
                    ->Watch("pods", kNs, "", "metadata.name=" + name,
                            std::to_string(server_->resource_version()), &watch)
                    .ok());
    return watch;
  }
  std::vector<WatchEvent> EventsUntilDeleted(ObjectStore::Watch* watch) {
    std::vector<WatchEvent> events;
    const auto deadline = std::chrono::steady_clock::now() + kWait;
    WatchEvent event;
    while (watch->Next(deadline, &event) == ObjectStore::Watch::Result::kEvent) {
      events.push_back(event);
      if (event.type == "DELETED") break;
    }
    return events;
  }

  std::unique_ptr<FakeApiServer> server_;
  std::unique_ptr<LocalNode> node_;
  std::string work_dir_;
};

TEST_F(LocalNodeTest, ExitCodesDecideThePhase) {
  Create(PodObject("fails", {"sh", "-c", "exit 3"}));
  Create(PodObject("succeeds", {"sh", "-c", "echo hello from $HOSTNAME"}));
  json pod;
  ASSERT_TRUE(WaitFinished("fails", &pod)) << pod.dump(2);
  EXPECT_EQ(Phase(&pod), "Failed");
  EXPECT_EQ(Terminated(pod)["exitCode"], 3);
  EXPECT_EQ(Terminated(pod)["reason"], "Error");
  EXPECT_EQ(pod["spec"]["nodeName"], "local-node");
  EXPECT_EQ((*Condition(pod, "PodScheduled"))["status"], "True");
  EXPECT_EQ((*Condition(pod, "Initialized"))["status"], "True");
  EXPECT_EQ((*Condition(pod, "Ready"))["reason"], "PodCompleted");
  EXPECT_EQ(pod["status"]["hostIP"], node_->host_ip());
  const std::string ip = pod["status"]["podIP"];
  EXPECT_EQ(ip.substr(0, ip.rfind('.')),
            node_->subnet().substr(0, node_->subnet().rfind('.')));
  EXPECT_FALSE(pod["status"]["startTime"].get<std::string>().empty());
  EXPECT_FALSE(Terminated(pod)["startedAt"].get<std::string>().empty());

  ASSERT_TRUE(WaitFinished("succeeds", &pod));
  EXPECT_EQ(Phase(&pod), "Succeeded");
  EXPECT_EQ(Terminated(pod)["exitCode"], 0);
  EXPECT_EQ(Terminated(pod)["reason"], "Completed");
  EXPECT_EQ(Log("succeeds"), "hello from succeeds\n");
  EXPECT_EQ(node_->LogPath(kNs, "succeeds").rfind(work_dir_ + "/logs/default_succeeds_", 0), 0u);

  // A command that cannot be executed fails the pod as containerd does.
  Create(PodObject("missing", {"no-such-command"}));
  ASSERT_TRUE(WaitFinished("missing", &pod));
  EXPECT_EQ(Phase(&pod), "Failed");
  EXPECT_EQ(Terminated(pod)["exitCode"], 128);
  EXPECT_EQ(Terminated(pod)["reason"], "StartError");
  EXPECT_NE(Terminated(pod)["message"].get<std::string>().find("executable file not found"),
            std::string::npos);
}

TEST_F(LocalNodeTest, EnvironmentIsExpandedAndFieldRefsResolved) {
  Create(SecretObject("creds", {{"password", "s3cret"}}));
  Create(ConfigMapObject("settings", {{"LEVEL", "debug"}}));
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
  Create(pod);
  json done;
  ASSERT_TRUE(WaitFinished("env", &done));
  ASSERT_EQ(Phase(&done), "Succeeded") << Log("env");
  const std::string ip = done["status"]["podIP"];
  EXPECT_EQ(Log("env"), "hello world $(UNDEFINED)|$(NAME)|env|default|local-node|" + ip +
                            "|s3cret|debug|env|1|/tmp\n" + work_dir_ +
                            "/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n");
}

TEST_F(LocalNodeTest, MissingSecretKeepsThePodWaitingUntilItExists) {
  json pod = PodObject("waits", {"sh", "-c", "echo $TOKEN"});
  MainContainer(&pod)["env"] = {
      {{"name", "TOKEN"}, {"valueFrom", {{"secretKeyRef", {{"name", "late"}, {"key", "t"}}}}}}};
  Create(pod);
  json seen;
  ASSERT_TRUE(WaitPod(
      "waits",
      [](const json* p) {
        return p != nullptr && Phase(p) == "Pending" &&
               p->contains("status") && (*p)["status"].contains("containerStatuses") &&
               (*p)["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] ==
                   "CreateContainerConfigError";
      },
      &seen))
      << seen.dump(2);
  EXPECT_EQ(seen["status"]["containerStatuses"][0]["state"]["waiting"]["message"],
            "secret \"late\" not found");
  Create(SecretObject("late", {{"t", "arrived"}}));
  ASSERT_TRUE(WaitFinished("waits", &seen));
  EXPECT_EQ(Phase(&seen), "Succeeded");
  EXPECT_EQ(Log("waits"), "arrived\n");
}

TEST_F(LocalNodeTest, SecretAndConfigMapVolumesAreReadOnlyFiles) {
  Create(SecretObject("job-token", {{"token", "abc123"}}));
  Create(ConfigMapObject("job-config", {{"job.yaml", "kind: TrainingJob\n"}}));
  // Mountpoints that do not exist are made on the host (and left there):
  // keep them in the test's directory. The config map is mounted inside the
  // emptyDir, which must therefore be mounted first.
  const std::string secret_path = work_dir_ + "/run/gaptrain";
  const std::string scratch_path = work_dir_ + "/scratch";
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
  Create(pod);
  json done;
  ASSERT_TRUE(WaitFinished("volumes", &done));
  EXPECT_EQ(Phase(&done), "Succeeded") << done.dump(2);
  EXPECT_EQ(Log("volumes"), "abc123kind: TrainingJob\n644\nread-only\nscratch\n");
  EXPECT_FALSE(PathExists(scratch_path + "/file"));  // the host sees the empty mountpoint
}

TEST_F(LocalNodeTest, ClaimOutlivesItsPods) {
  Create(ClaimObject("checkpoints"));
  const std::string mount_path = work_dir_ + "/var/lib/gaptrain/checkpoints";
  auto pod_with_claim = [&](const std::string& name, const std::string& script) {
    json pod = PodObject(name, {"sh", "-c", script});
    pod["spec"]["volumes"] = {
        {{"name", "data"}, {"persistentVolumeClaim", {{"claimName", "checkpoints"}}}}};
    MainContainer(&pod)["volumeMounts"] = {{{"name", "data"}, {"mountPath", mount_path}}};
    return pod;
  };
  Create(pod_with_claim("writer", "echo step-42 > " + mount_path + "/ckpt"));
  json pod;
  ASSERT_TRUE(WaitFinished("writer", &pod));
  ASSERT_EQ(Phase(&pod), "Succeeded") << Log("writer");
  ASSERT_TRUE(server_->Delete("pods", kNs, "writer").ok());
  ASSERT_TRUE(WaitPod("writer", [](const json* p) { return p == nullptr; }));

  json claim;
  ASSERT_TRUE(server_->Get("persistentvolumeclaims", kNs, "checkpoints", &claim).ok());
  EXPECT_EQ(claim["status"]["phase"], "Bound");
  EXPECT_EQ(claim["status"]["capacity"]["storage"], "1Gi");
  EXPECT_EQ(claim["spec"]["volumeName"], "pvc-" + claim["metadata"]["uid"].get<std::string>());
  std::string dir;
  ASSERT_TRUE(node_->ClaimPath(kNs, "checkpoints", &dir).ok());
  EXPECT_EQ(ReadRaw(dir + "/ckpt"), "step-42\n");

  Create(pod_with_claim("reader", "cat " + mount_path + "/ckpt"));
  EXPECT_FALSE(PathExists(mount_path + "/ckpt"));  // the host sees an empty mountpoint
  ASSERT_TRUE(WaitFinished("reader", &pod));
  EXPECT_EQ(Phase(&pod), "Succeeded");
  EXPECT_EQ(Log("reader"), "step-42\n");
}

TEST_F(LocalNodeTest, PodWithoutItsClaimIsUnschedulable) {
  json pod = PodObject("early", {"true"});
  pod["spec"]["volumes"] = {{{"name", "data"}, {"persistentVolumeClaim", {{"claimName", "later"}}}}};
  Create(pod);
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
  Create(ClaimObject("later"));
  ASSERT_TRUE(WaitFinished("early", &seen));
  EXPECT_EQ(Phase(&seen), "Succeeded");
  EXPECT_EQ((*Condition(seen, "PodScheduled"))["status"], "True");
}

// Both pods listen on port 8080 in namespaces of their own; the client,
// created before the server and its Service exist, finds the server by the
// Service's name once its pod runs.
TEST_F(LocalNodeTest, PodsOwnTheirPortsAndFindEachOtherByServiceName) {
  Create(PythonPod("client", R"(
import socket, time, urllib.request
mine = socket.socket()
mine.bind(("0.0.0.0", 8080))
mine.listen()
print("listening", flush=True)
deadline = time.time() + 25
while True:
    try:
        for name in ("server", "server.default.svc.cluster.local"):
            body = urllib.request.urlopen("http://%s:8080/" % name, timeout=2).read()
            print(name, "->", body.decode())
        break
    except Exception as e:
        if time.time() > deadline:
            raise
        time.sleep(0.05)
)"));
  ASSERT_TRUE(WaitLog("client", "listening"));
  json service = {{"apiVersion", "v1"},
                  {"kind", "Service"},
                  {"metadata", {{"name", "server"}, {"namespace", kNs}}},
                  {"spec",
                   {{"clusterIP", "None"},
                    {"publishNotReadyAddresses", true},
                    {"selector", {{"app", "server"}}},
                    {"ports", {{{"name", "http"}, {"port", 8080}}}}}}};
  Create(service);
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
  Create(server);
  json pod;
  ASSERT_TRUE(WaitFinished("client", &pod));
  EXPECT_EQ(Phase(&pod), "Succeeded") << Log("client");
  EXPECT_EQ(Log("client"),
            "listening\nserver -> hello from server\n"
            "server.default.svc.cluster.local -> hello from server\n");

  // The root namespace (where the operator runs) reaches the pod by its IP.
  ASSERT_TRUE(WaitRunning("server", &pod));
  HttpClientResponse response;
  const Status got = HttpGet(pod["status"]["podIP"], 8080, "/", 5, &response);
  ASSERT_TRUE(got.ok()) << got.ToString();
  EXPECT_EQ(response.body, "hello from server");
}

TEST_F(LocalNodeTest, GracefulDeleteRecordsTheProcessesOwnExitCode) {
  Create(PythonPod("graceful", R"(
import signal, sys, time
def stop(signum, frame):
    print("got SIGTERM", flush=True)
    sys.exit(7)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
time.sleep(60)
)"));
  ASSERT_TRUE(WaitLog("graceful", "ready\n"));
  std::unique_ptr<ObjectStore::Watch> watch = WatchPod("graceful");
  ASSERT_TRUE(server_->Delete("pods", kNs, "graceful", 30).ok());
  std::vector<WatchEvent> events = EventsUntilDeleted(watch.get());
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back().type, "DELETED");
  const json& last = events.back().object;  // as it was when it went
  EXPECT_EQ(Phase(&last), "Failed");
  EXPECT_EQ(Terminated(last)["exitCode"], 7);
  EXPECT_EQ(Terminated(last)["reason"], "Error");
  EXPECT_FALSE(Terminated(last).contains("signal"));
  EXPECT_EQ(Log("graceful"), "ready\ngot SIGTERM\n");
}

TEST_F(LocalNodeTest, ProcessIgnoringSigtermIsKilledAfterTheGracePeriod) {
  Create(PythonPod("stubborn", R"(
import os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
time.sleep(60)
)"));
  ASSERT_TRUE(WaitLog("stubborn", "ready\n"));
  std::unique_ptr<ObjectStore::Watch> watch = WatchPod("stubborn");
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(server_->Delete("pods", kNs, "stubborn", 1).ok());
  std::vector<WatchEvent> events = EventsUntilDeleted(watch.get());
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  ASSERT_GE(events.size(), 2u);
  ASSERT_EQ(events.back().type, "DELETED");
  const json& last = events.back().object;
  EXPECT_EQ(Terminated(last)["exitCode"], 137);
  EXPECT_EQ(Terminated(last)["signal"], 9);
  EXPECT_EQ(Phase(&last), "Failed");
}

TEST_F(LocalNodeTest, ImmediateDeleteKillsTheProcess) {
  const pid_t pid = RunPodTellingItsPid("doomed");
  ASSERT_GT(pid, 0);
  ASSERT_FALSE(ProcessGone(pid));
  ASSERT_TRUE(server_->Delete("pods", kNs, "doomed", 0).ok());
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  while (!ProcessGone(pid) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(ProcessGone(pid));
}

TEST_F(LocalNodeTest, KillContainerAndOutOfMemory) {
  Create(PodObject("crash", {"sleep", "60"}));
  Create(PodObject("oom", {"sleep", "60"}));
  ASSERT_TRUE(WaitRunning("crash"));
  ASSERT_TRUE(WaitRunning("oom"));
  ASSERT_TRUE(node_->KillContainer(kNs, "crash", SIGSEGV).ok());
  ASSERT_TRUE(node_->OutOfMemory(kNs, "oom").ok());
  json pod;
  ASSERT_TRUE(WaitFinished("crash", &pod));
  EXPECT_EQ(Phase(&pod), "Failed");
  EXPECT_EQ(Terminated(pod)["exitCode"], 128 + SIGSEGV);
  EXPECT_EQ(Terminated(pod)["signal"], SIGSEGV);
  EXPECT_EQ(Terminated(pod)["reason"], "Error");
  ASSERT_TRUE(WaitFinished("oom", &pod));
  EXPECT_EQ(Terminated(pod)["exitCode"], 137);
  EXPECT_EQ(Terminated(pod)["reason"], "OOMKilled");
  EXPECT_EQ(node_->KillContainer(kNs, "oom", SIGKILL).code(), Status::Code::kNotFound);
}

TEST_F(LocalNodeTest, NodeShutdownLooksAsRecorded) {
  std::ifstream recorded_file(RecordedK8sExchange("pod-status-disruption-target"));
  ASSERT_TRUE(recorded_file.good()) << "missing ../shared/k8s/recorded";
  const json recorded = json::parse(recorded_file)["response"]["body"]["status"];

  json pod = PodObject("spot", {"sleep", "60"});
  pod["spec"]["terminationGracePeriodSeconds"] = 5;
  Create(pod);
  ASSERT_TRUE(WaitRunning("spot"));
  std::unique_ptr<ObjectStore::Watch> watch = WatchPod("spot");
  ASSERT_TRUE(node_->Preempt(kNs, "spot").ok());
  std::vector<WatchEvent> events = EventsUntilDeleted(watch.get());
  ASSERT_GE(events.size(), 2u);
  ASSERT_EQ(events.back().type, "DELETED");
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
  Create(PodObject("victim", {"sleep", "60"}));
  ASSERT_TRUE(WaitRunning("victim"));
  std::unique_ptr<ObjectStore::Watch> watch = WatchPod("victim");
  ASSERT_TRUE(node_->Preempt(kNs, "victim", LocalNode::Disruption::kSchedulerPreemption).ok());
  std::vector<WatchEvent> events = EventsUntilDeleted(watch.get());
  ASSERT_GE(events.size(), 2u);
  ASSERT_EQ(events.back().type, "DELETED");
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
  const std::string flag_dir = work_dir_ + "/flags";
  ASSERT_EQ(mkdir(flag_dir.c_str(), 0755) == 0 || errno == EEXIST, true);
  const std::string mount_path = work_dir_ + "/mnt/flags";
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
  Create(pod);
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
  Create(PodObject("plain", {"sleep", "60"}));
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
  Create(pod);
  json seen;
  ASSERT_TRUE(WaitFinished("unhealthy", &seen));
  EXPECT_EQ(Phase(&seen), "Failed");
  EXPECT_EQ(Terminated(seen)["exitCode"], 143);
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
  EXPECT_FALSE(PathExists(work_dir_ + "/pods"));
  EXPECT_FALSE(PathExists(work_dir_ + "/bin"));
  EXPECT_TRUE(PathExists(node_->LogPath(kNs, "lingering")));  // logs are kept
}

TEST_F(LocalNodeTest, RecreatedPodKeepsItsAddress) {
  Create(PodObject("again", {"sleep", "60"}));
  json first;
  ASSERT_TRUE(WaitRunning("again", &first));
  ASSERT_TRUE(server_->Delete("pods", kNs, "again", 0).ok());
  Create(PodObject("again", {"sleep", "60"}));
  json second;
  ASSERT_TRUE(WaitPod(
      "again",
      [&](const json* p) {
        return Phase(p) == "Running" && (*p)["metadata"]["uid"] != first["metadata"]["uid"];
      },
      &second));
  EXPECT_EQ(second["status"]["podIP"], first["status"]["podIP"]);
}

// A node that comes back finds the containers of its running pods gone.
TEST_F(LocalNodeTest, RestartedNodeFailsThePodsThatWereRunning) {
  Create(PodObject("orphan", {"sleep", "60"}));
  ASSERT_TRUE(WaitRunning("orphan"));
  node_->Stop();
  LocalNode::Options options;
  options.work_dir = work_dir_;
  ASSERT_TRUE(LocalNode::Start(server_.get(), options, &node_).ok());
  json pod;
  ASSERT_TRUE(WaitFinished("orphan", &pod));
  EXPECT_EQ(Phase(&pod), "Failed");
  EXPECT_EQ(Terminated(pod)["exitCode"], 137);
  EXPECT_EQ(Terminated(pod)["reason"], "ContainerStatusUnknown");
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

  ASSERT_TRUE(PodNetwork::RemoveStale(work_dir_).ok());
  EXPECT_EQ(IpOutput({"netns", "list"}).find(stale), std::string::npos);
  EXPECT_EQ(IpOutput({"link", "show"}).find(stale), std::string::npos);
  // This process's own network is alive and stays.
  EXPECT_NE(IpOutput({"link", "show"}).find(node_->name_prefix()), std::string::npos);
}

TEST_F(LocalNodeTest, RunsTheRealCoordinatorBinary) {
  Create(PodObject("coordinator", {"gaptrain-coordinator", "--help"}));
  json pod;
  ASSERT_TRUE(WaitFinished("coordinator", &pod));
  EXPECT_EQ(Phase(&pod), "Succeeded") << Log("coordinator");
  EXPECT_EQ(Log("coordinator").rfind("usage: gaptrain-coordinator", 0), 0u) << Log("coordinator");
}

// The coordinator as the operator runs it: job from a ConfigMap, token from
// a Secret, state on a claim, Ready by its /healthz, /status by pod IP.
TEST_F(LocalNodeTest, ServesTheRealCoordinatorAsTheOperatorWould) {
  Create(SecretObject("mnist-token", {{"token", "0123456789abcdef"}}));
  Create(ConfigMapObject("mnist-job", {{"job.yaml", R"(apiVersion: gaptrain.io/v1alpha1
kind: TrainingJob
metadata: {name: mnist, namespace: default}
spec:
  model: {builtin: mlp}
  data: {format: mnist-idx, path: /unused}
  training: {batchSize: 100, epochs: 1}
  workers: {replicas: 1}
)"}}));
  Create(ClaimObject("mnist-coordinator-state"));
  const std::string token_dir = work_dir_ + "/var/run/gaptrain";
  const std::string job_dir = work_dir_ + "/etc/gaptrain";
  const std::string state_dir = work_dir_ + "/var/lib/gaptrain/coordinator";
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
  Create(pod);
  json seen;
  ASSERT_TRUE(WaitPod("mnist-coordinator", IsReady, &seen))
      << seen.dump(2) << Log("mnist-coordinator");
  HttpClientResponse status;
  const Status got = HttpGet(seen["status"]["podIP"], 9091, "/status", 5, &status);
  ASSERT_TRUE(got.ok()) << got.ToString();
  EXPECT_EQ(json::parse(status.body)["jobName"], "mnist") << status.body;
}

TEST(LocalNodeStartTest, RejectsBadOptions) {
  std::unique_ptr<FakeApiServer> server;
  ASSERT_TRUE(FakeApiServer::Start(FakeApiServer::Options(), &server).ok());
  std::unique_ptr<LocalNode> node;
  LocalNode::Options options;
  EXPECT_EQ(LocalNode::Start(server.get(), options, &node).code(),
            Status::Code::kInvalidArgument);  // no work_dir
  options.work_dir = TestDir("node");
  options.binaries = {{"gaptrain-master", "/no/such/binary"}};
  const Status bad = LocalNode::Start(server.get(), options, &node);
  EXPECT_EQ(bad.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(bad.message().find("/no/such/binary"), std::string::npos);
  EXPECT_EQ(LocalNode::Start(nullptr, options, &node).code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace kube_testing
}  // namespace gaptrain
