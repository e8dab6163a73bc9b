// Every command the operator puts in a pod (operator/trainingjob/
// desired_children.cc), parsed by the flag parser of the program it starts:
// gaptrain-master, gaptrain-coordinator, gaptrain-worker (trainer and
// evaluator) and `gaptrain export`. A flag renamed in a parser, or a value
// it would refuse, fails here instead of in a cluster. Beyond parsing, the
// values must fit the rest of the pod: the HTTP port is the one the probes
// and the container ports name, the token file is the Secret's key on its
// mount, the job file is the ConfigMap's and parses as a TrainingJob, the
// state directories are the claims' mounts, the addresses are the
// Services', the certificate and the status token (a new job's TLS) the
// Secrets' keys. The container runs as the kubelet would start it: command
// then args, $(VAR) expanded from the container's env. A worker's settings
// are in its env too (GAPTRAIN_JOB, ...), for a template's own trainer
// command: they parse as the same flags.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cli/export/export_options.h"
#include "operator/trainingjob/desired_children.h"
#include "services/api/training_job.h"
#include "services/base/status.h"
#include "services/coordinator/coordinator_options.h"
#include "services/master/master_options.h"
#include "services/net/server_flags.h"
#include "services/testing/test_files.h"
#include "services/worker/worker_options.h"

namespace gaptrain {
namespace {

using nlohmann::json;
using trainingjob::BuildDesiredChildren;
using trainingjob::BuildExportPod;
using trainingjob::DesiredChildren;
using trainingjob::OperatorConfig;
using trainingjob::ReplicaType;

constexpr char kUid[] = "0c8e3f5e-9d2b-4f0e-8a47-3b1d2f6a9c10";

// Defaults everywhere: no templates, no output, no data claim.
json DefaultJob() {
  json job = json::parse(R"j({
    "apiVersion": "gaptrain.io/v1alpha1", "kind": "TrainingJob",
    "metadata": {"name": "mnist", "namespace": "default"},
    "spec": {"data": {"format": "mnist-idx", "path": "/data/mnist"},
             "training": {"batchSize": 64, "epochs": 1},
             "workers": {"replicas": 1}}})j");
  job["metadata"]["uid"] = kUid;
  return job;
}

// spec.output: the job gets an export pod once it has succeeded.
json JobWithOutput() {
  json job = DefaultJob();
  job["metadata"]["name"] = "fashion";
  job["spec"]["output"] = {{"claimName", "models"}, {"path", "fashion/lenet5.pt"}};
  return job;
}

// Every field that changes a command or what it names: another namespace,
// a data claim, preemptible workers, three trainers, grace periods in the
// templates (the workers' --grace-seconds), spec.output with a nested
// path, and templates with sidecars and labels.
json JobWithEverything() {
  json job = json::parse(R"j({
    "apiVersion": "gaptrain.io/v1alpha1", "kind": "TrainingJob",
    "metadata": {"name": "cifar-long-run", "namespace": "team-vision",
                 "labels": {"team": "vision"}},
    "spec": {
      "data": {"format": "cifar10-bin", "path": "/datasets/cifar10",
               "claimName": "cifar-data"},
      "model": {"builtin": "resnet20"},
      "training": {"batchSize": 128, "epochs": 3},
      "master": {"checkpoint": {"volumeSize": "2Gi", "storageClassName": "fast"},
                 "template": {"spec": {"terminationGracePeriodSeconds": 120,
                                       "containers": [{"name": "gaptrain"},
                                                      {"name": "log-shipper",
                                                       "image": "busybox"}]}}},
      "coordinator": {"stateVolumeSize": "1Gi",
                      "template": {"spec": {"terminationGracePeriodSeconds": 45}}},
      "evaluator": {"template": {"spec": {"terminationGracePeriodSeconds": 3}}},
      "workers": {"replicas": 3, "preemptible": true,
                  "template": {"metadata": {"labels": {"tier": "spot"}},
                               "spec": {"terminationGracePeriodSeconds": 90}}},
      "output": {"claimName": "models", "path": "vision/cifar/resnet20.pt"}}})j");
  job["metadata"]["uid"] = kUid;
  return job;
}

// What a pod's first container runs: command then args, with $(NAME)
// replaced by the container's env as the kubelet does ($$ is a literal $;
// an unknown $(NAME) stays as written). Env from the Downward API:
// metadata.name and metadata.namespace; other sources read as unknown.
// Env values are expanded likewise, from the variables defined before
// them.
std::string ExpandVars(const std::map<std::string, std::string>& env, const std::string& in);

std::map<std::string, std::string> ContainerEnv(const json& pod) {
  const json& c = pod["spec"]["containers"][0];
  std::map<std::string, std::string> env;
  for (const json& e : c.value("env", json::array())) {
    if (e.contains("value")) {
      env[e["name"]] = ExpandVars(env, e["value"]);
    } else if (e.contains("valueFrom") && e["valueFrom"].contains("fieldRef")) {
      const std::string field = e["valueFrom"]["fieldRef"]["fieldPath"];
      if (field == "metadata.name") env[e["name"]] = pod["metadata"]["name"];
      if (field == "metadata.namespace") env[e["name"]] = pod["metadata"]["namespace"];
    }
  }
  return env;
}

std::vector<std::string> ContainerArgv(const json& pod) {
  const json& c = pod["spec"]["containers"][0];
  const std::map<std::string, std::string> env = ContainerEnv(pod);
  auto expand = [&env](const std::string& in) { return ExpandVars(env, in); };
  std::vector<std::string> argv;
  for (const char* key : {"command", "args"}) {
    for (const json& a : c.value(key, json::array())) argv.push_back(expand(a));
  }
  return argv;
}

std::string ExpandVars(const std::map<std::string, std::string>& env, const std::string& in) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '$' && i + 1 < in.size() && in[i + 1] == '$') {
      out += '$';
      ++i;
      continue;
    }
    const size_t close = in.find(')', i);
    if (in.compare(i, 2, "$(") == 0 && close != std::string::npos) {
      auto found = env.find(in.substr(i + 2, close - i - 2));
      if (found != env.end()) {
        out += found->second;
        i = close;
        continue;
      }
    }
    out += in[i];
  }
  return out;
}

// The pod's volumes as the test "mounts" them: the keys of the job's
// Secret and ConfigMap become files named PREFIX-VOLUME-KEY, and an
// argument naming MOUNT/KEY is rewritten to that file, so that the parsers
// read the token (and the test the job file) the pod would read. Claims
// hold no files here: their paths stay as they are.
class Mounts {
 public:
  Mounts(const json& pod, const DesiredChildren& children, const std::string& prefix) {
    std::map<std::string, json> volumes;
    for (const json& v : pod["spec"]["volumes"]) volumes[v["name"]] = v;
    for (const json& m : pod["spec"]["containers"][0].value("volumeMounts", json::array())) {
      const std::string volume = m["name"];
      const std::string path = m["mountPath"];
      mount_of_volume_[volume] = path;
      const json& v = volumes[volume];
      json files = json::object();
      if (v.contains("secret") &&
          v["secret"]["secretName"] == children.secret["metadata"]["name"]) {
        files = children.secret["stringData"];
      }
      if (v.contains("secret") && children.tls_secret &&
          v["secret"]["secretName"] == (*children.tls_secret)["metadata"]["name"]) {
        files = (*children.tls_secret)["stringData"];
      }
      if (v.contains("configMap") &&
          v["configMap"]["name"] == children.config_map["metadata"]["name"]) {
        files = children.config_map["data"];
      }
      for (auto it = files.begin(); it != files.end(); ++it) {
        const std::string local = prefix + "-" + volume + "-" + it.key();
        WriteRaw(local, it.value().get<std::string>());
        local_[path + "/" + it.key()] = local;
        mounted_files_.insert(local);
      }
    }
  }

  std::vector<std::string> Rewrite(std::vector<std::string> argv) const {
    for (std::string& a : argv) {
      auto found = local_.find(a);
      if (found != local_.end()) a = found->second;
    }
    return argv;
  }
  // Whether `local` is a file Rewrite() put in an argument.
  bool IsMountedFile(const std::string& local) const { return mounted_files_.count(local) > 0; }
  // Where the volume named `volume` is mounted ("" when it is not).
  std::string MountOf(const std::string& volume) const {
    auto found = mount_of_volume_.find(volume);
    return found == mount_of_volume_.end() ? "" : found->second;
  }

 private:
  std::map<std::string, std::string> local_;  // pod path -> file here
  std::set<std::string> mounted_files_;
  std::map<std::string, std::string> mount_of_volume_;
};

// The volume of `pod` whose source is the claim `claim` ("" when none).
std::string VolumeOfClaim(const json& pod, const std::string& claim) {
  for (const json& v : pod["spec"]["volumes"]) {
    if (v.contains("persistentVolumeClaim") && v["persistentVolumeClaim"]["claimName"] == claim) {
      return v["name"];
    }
  }
  return "";
}

int ContainerPort(const json& pod, const std::string& name) {
  for (const json& p : pod["spec"]["containers"][0]["ports"]) {
    if (p["name"] == name) return p["containerPort"];
  }
  ADD_FAILURE() << "no container port " << name;
  return -1;
}

// "SERVICE.NAMESPACE.svc:PORT": how a pod reaches the Service's port `port_name`.
std::string ServiceAddress(const DesiredChildren& children, const std::string& service,
                           const std::string& port_name) {
  for (const json& s : children.services) {
    if (s["metadata"]["name"] != service) continue;
    for (const json& p : s["spec"]["ports"]) {
      if (p["name"] == port_name) {
        return service + "." + s["metadata"]["namespace"].get<std::string>() +
               ".svc:" + std::to_string(p["port"].get<int>());
      }
    }
  }
  ADD_FAILURE() << "no Service " << service << " with a port " << port_name;
  return "";
}

std::string Joined(const std::vector<std::string>& argv) {
  std::string text;
  for (const std::string& a : argv) text += (text.empty() ? "" : " ") + a;
  return text;
}

struct Built {
  bool ok = false;
  TrainingJob spec;
  DesiredChildren children;
  std::string token;
  std::string status_token;
};

Built BuildChildren(const json& job) {
  Built b;
  Status s = ParseTrainingJob(job.dump(), "test", &b.spec);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return b;
  std::array<uint8_t, 32> bytes{};
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(7 * i + 3);
  // As a new job gets them: in-cluster TLS and a status token.
  static const trainingjob::JobTls tls{"-----BEGIN CERTIFICATE-----\n",
                                       "-----BEGIN PRIVATE KEY-----\n"};
  trainingjob::JobCredentials credentials{bytes};
  credentials.tls = &tls;
  credentials.status_token = "status-" + trainingjob::TokenText(bytes);
  s = BuildDesiredChildren(job, b.spec, OperatorConfig(), OperatorConfig().image, credentials,
                           &b.children);
  EXPECT_TRUE(s.ok()) << s.ToString();
  b.token = trainingjob::TokenText(bytes);
  b.status_token = credentials.status_token;
  b.ok = s.ok();
  return b;
}

// The job file a pod names (`local`, rewritten by Mounts) is a key of the
// mounted ConfigMap, which the services parse as the same job.
void ExpectJobFile(const Mounts& mounts, const std::string& local, const TrainingJob& spec) {
  ASSERT_TRUE(mounts.IsMountedFile(local)) << local << " is no key of the mounted ConfigMap";
  TrainingJob read;
  Status s = LoadTrainingJob(local, &read);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(read.name, spec.name);
  EXPECT_EQ(read.namespace_name, spec.namespace_name);
}

// The flags of the pod's command after `program` (its first words, which
// must be these), with the mounted files' paths rewritten.
std::vector<std::string> FlagsOf(const json& pod, const Mounts& mounts,
                                 const std::vector<std::string>& program) {
  const std::vector<std::string> argv = mounts.Rewrite(ContainerArgv(pod));
  const size_t n = std::min(program.size(), argv.size());
  EXPECT_EQ(std::vector<std::string>(argv.begin(), argv.begin() + n), program);
  return std::vector<std::string>(argv.begin() + n, argv.end());
}

// What the master and the coordinator share (ServerFlags): the token from
// the Secret, the job from the ConfigMap, gRPC on the container's "grpc"
// port, HTTP on its "metrics" port, which both probes ask.
void ExpectServerFlags(const ServerFlags& server, const json& pod, const Built& b,
                       const Mounts& mounts) {
  EXPECT_EQ(server.token, b.token);
  EXPECT_FALSE(server.allow_no_token);
  ExpectJobFile(mounts, server.job_file, b.spec);
  EXPECT_EQ(server.listen, "0.0.0.0:" + std::to_string(ContainerPort(pod, "grpc")));
  const json& container = pod["spec"]["containers"][0];
  EXPECT_EQ(server.http_port, ContainerPort(pod, "metrics"));
  EXPECT_EQ(server.http_port, container["readinessProbe"]["httpGet"]["port"]);
  EXPECT_EQ(server.http_port, container["livenessProbe"]["httpGet"]["port"]);
}

void CheckMaster(const json& pod, const Built& b, const Mounts& mounts) {
  MasterOptions o;
  const Status s = ParseMasterFlags(FlagsOf(pod, mounts, {"gaptrain-master"}), &o);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectServerFlags(o.server, pod, b, mounts);
  EXPECT_TRUE(mounts.IsMountedFile(o.server.tls_cert)) << "no certificate: " << o.server.tls_cert;
  EXPECT_TRUE(mounts.IsMountedFile(o.server.tls_key)) << "no key: " << o.server.tls_key;
  const std::string volume = VolumeOfClaim(pod, trainingjob::CheckpointsClaimName(b.spec.name));
  EXPECT_NE(o.checkpoint_dir, "");
  EXPECT_EQ(o.checkpoint_dir, mounts.MountOf(volume)) << "checkpoints not on their claim";
}

void CheckCoordinator(const json& pod, const Built& b, const Mounts& mounts) {
  CoordinatorOptions o;
  const Status s = ParseCoordinatorFlags(FlagsOf(pod, mounts, {"gaptrain-coordinator"}), &o);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectServerFlags(o.server, pod, b, mounts);
  const std::string master = trainingjob::ReplicaName(b.spec.name, ReplicaType::kMaster);
  EXPECT_EQ(o.master, ServiceAddress(b.children, master, "grpc"));
  EXPECT_TRUE(mounts.IsMountedFile(o.server.tls_cert)) << "no certificate: " << o.server.tls_cert;
  EXPECT_TRUE(mounts.IsMountedFile(o.master_ca)) << "no CA for the master: " << o.master_ca;
  EXPECT_EQ(o.status_token, b.status_token) << "/status not locked with the Secret's token";
  const std::string volume =
      VolumeOfClaim(pod, trainingjob::CoordinatorStateClaimName(b.spec.name));
  EXPECT_NE(o.state_dir, "");
  EXPECT_EQ(o.state_dir, mounts.MountOf(volume)) << "state not on its claim";
}

// gaptrain-worker's flags from the worker's settings in the container's
// environment (GAPTRAIN_JOB, ...), which a user's trainer command (the
// Python SDK) reads in their place; a variable missing is left out.
std::vector<std::string> FlagsOfEnv(const json& pod, const Mounts& mounts) {
  const std::map<std::string, std::string> env = ContainerEnv(pod);
  std::vector<std::string> flags;
  for (const auto& [flag, var] : std::vector<std::pair<std::string, std::string>>{
           {"--job", "GAPTRAIN_JOB"},
           {"--role", "GAPTRAIN_ROLE"},
           {"--coordinator", "GAPTRAIN_COORDINATOR"},
           {"--token-file", "GAPTRAIN_TOKEN_FILE"},
           {"--coordinator-ca", "GAPTRAIN_COORDINATOR_CA"},
           {"--master-ca", "GAPTRAIN_MASTER_CA"},
           {"--http-port", "GAPTRAIN_HTTP_PORT"},
           {"--host-name", "GAPTRAIN_HOST_NAME"},
           {"--grace-seconds", "GAPTRAIN_GRACE_SECONDS"}}) {
    auto found = env.find(var);
    EXPECT_NE(found, env.end()) << var;
    if (found != env.end()) flags.insert(flags.end(), {flag, found->second});
  }
  return mounts.Rewrite(flags);
}

void ExpectWorkerOptions(const WorkerOptions& o, const json& pod, const Built& b,
                         const Mounts& mounts, bool evaluator);

// A worker pod runs gaptrain-worker with its flags, or the template's own
// command as given (`user_command`); either way its environment holds the
// same settings.
void CheckWorker(const json& pod, const Built& b, const Mounts& mounts, bool evaluator,
                 const json& user_command = nullptr) {
  if (user_command.is_null()) {
    WorkerOptions o;
    const Status s = ParseWorkerFlags(FlagsOf(pod, mounts, {"gaptrain-worker"}), &o);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ExpectWorkerOptions(o, pod, b, mounts, evaluator);
  } else {
    EXPECT_EQ(pod["spec"]["containers"][0]["command"], user_command);
  }
  SCOPED_TRACE("from the environment: " + Joined(FlagsOfEnv(pod, mounts)));
  WorkerOptions o;
  const Status s = ParseWorkerFlags(FlagsOfEnv(pod, mounts), &o);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectWorkerOptions(o, pod, b, mounts, evaluator);
}

void ExpectWorkerOptions(const WorkerOptions& o, const json& pod, const Built& b,
                         const Mounts& mounts, bool evaluator) {
  EXPECT_EQ(o.token, b.token);
  ExpectJobFile(mounts, o.job_file, b.spec);
  EXPECT_TRUE(mounts.IsMountedFile(o.coordinator_ca)) << "no CA: " << o.coordinator_ca;
  EXPECT_TRUE(mounts.IsMountedFile(o.master_ca)) << "no CA: " << o.master_ca;
  EXPECT_EQ(o.evaluator, evaluator);
  const std::string coordinator =
      trainingjob::ReplicaName(b.spec.name, ReplicaType::kCoordinator);
  EXPECT_EQ(o.coordinator, ServiceAddress(b.children, coordinator, "grpc"));
  EXPECT_EQ(o.http_port, ContainerPort(pod, "metrics"));
  EXPECT_EQ(o.http_port, pod["spec"]["containers"][0]["readinessProbe"]["httpGet"]["port"]);
  EXPECT_EQ(o.host_name, pod["metadata"]["name"]) << "the worker's name is its pod's";
  // It leaves before the kubelet kills it.
  const double grace_period = pod["spec"]["terminationGracePeriodSeconds"];
  EXPECT_GT(o.grace_seconds, 0);
  EXPECT_LT(o.grace_seconds, grace_period);
}

// `trainer_command`: the command of the workers' template, when it sets one.
void CheckChildren(const json& job, const json& trainer_command = nullptr) {
  const Built b = BuildChildren(job);
  ASSERT_TRUE(b.ok);
  const std::string dir = TestDir("pod_commands");
  ASSERT_EQ(b.children.pods.size(), 3 + b.spec.workers.replicas);
  int masters = 0, coordinators = 0, evaluators = 0, trainers = 0;
  for (const json& pod : b.children.pods) {
    const std::string name = pod["metadata"]["name"];
    SCOPED_TRACE("pod " + name + ": " + Joined(ContainerArgv(pod)));
    const Mounts mounts(pod, b.children, dir + "/" + name);
    const std::string type = pod["metadata"]["labels"]["gaptrain.io/replica-type"];
    if (type == "master") {
      ++masters;
      CheckMaster(pod, b, mounts);
    } else if (type == "coordinator") {
      ++coordinators;
      CheckCoordinator(pod, b, mounts);
    } else if (type == "evaluator") {
      ++evaluators;
      CheckWorker(pod, b, mounts, /*evaluator=*/true);
    } else {
      ++trainers;
      EXPECT_EQ(type, "trainer");
      CheckWorker(pod, b, mounts, /*evaluator=*/false, trainer_command);
    }
  }
  EXPECT_EQ(masters, 1);
  EXPECT_EQ(coordinators, 1);
  EXPECT_EQ(evaluators, 1);
  EXPECT_EQ(trainers, static_cast<int>(b.spec.workers.replicas));
}

void CheckExport(const json& job, std::optional<double> test_accuracy) {
  const Built b = BuildChildren(job);
  ASSERT_TRUE(b.ok);
  json pod;
  const Status built = BuildExportPod(job, b.spec, OperatorConfig(), OperatorConfig().image,
                                      test_accuracy, &pod);
  ASSERT_TRUE(built.ok()) << built.ToString();
  SCOPED_TRACE(Joined(ContainerArgv(pod)));
  const Mounts mounts(pod, b.children, TestDir("pod_commands") + "/export");
  ExportOptions o;
  const Status s = ParseExportFlags(FlagsOf(pod, mounts, {"gaptrain", "export"}), &o);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_FALSE(o.help);
  // The newest checkpoint in the master's claim.
  const std::string checkpoints =
      mounts.MountOf(VolumeOfClaim(pod, trainingjob::CheckpointsClaimName(b.spec.name)));
  EXPECT_NE(checkpoints, "");
  EXPECT_EQ(o.checkpoint_dir, checkpoints);
  EXPECT_EQ(o.checkpoint, "");
  EXPECT_EQ(o.run_dir, "");
  // To spec.output.path on spec.output's claim, with its card beside it.
  const std::string output = mounts.MountOf(VolumeOfClaim(pod, b.spec.output.claim_name));
  EXPECT_NE(output, "");
  EXPECT_EQ(o.output, output + "/" + b.spec.output.path);
  EXPECT_TRUE(o.make_dirs) << "spec.output.path's directories may not exist yet";
  EXPECT_EQ(o.card, o.output + ".json");
  ExpectJobFile(mounts, o.job_file, b.spec);
  EXPECT_EQ(o.test_accuracy, test_accuracy);
}

TEST(PodCommandsTest, DefaultJob) { CheckChildren(DefaultJob()); }

TEST(PodCommandsTest, JobWithOutput) {
  CheckChildren(JobWithOutput());
  CheckExport(JobWithOutput(), std::nullopt);
  CheckExport(JobWithOutput(), 0.9871);
}

TEST(PodCommandsTest, JobWithEveryOptionalField) {
  CheckChildren(JobWithEverything());
  CheckExport(JobWithEverything(), 1.0);
  CheckExport(JobWithEverything(), 0.0);
}

// A grace period longer than the worker's limit (a day) still starts the
// workers: their --grace-seconds is capped.
TEST(PodCommandsTest, WorkersWithAVeryLongGracePeriod) {
  json job = DefaultJob();
  job["spec"]["workers"]["template"] = {{"spec", {{"terminationGracePeriodSeconds", 90000}}}};
  job["spec"]["evaluator"]["template"] = {{"spec", {{"terminationGracePeriodSeconds", 200000}}}};
  CheckChildren(job);
}

// A trainer template with its own command (the Python SDK's script) runs
// it as given; its settings are in the environment, as gaptrain-worker's
// flags would give them.
TEST(PodCommandsTest, TrainersRunningTheTemplatesCommand) {
  json job = JobWithEverything();
  const json command = json::array({"python3", "/app/train.py"});
  job["spec"]["workers"]["template"]["spec"]["containers"] =
      json::array({{{"image", "registry.example.com/trainer:1"},
                    {"command", command},
                    {"args", json::array({"--result", "/tmp/result.json"})}}});
  CheckChildren(job, command);
}

}  // namespace
}  // namespace gaptrain
