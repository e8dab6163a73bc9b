// The children of a TrainingJob: golden pods (commands, env, volumes,
// probes, ports, labels, ownerReferences), spot tolerations and affinity
// for each preset, template merging that keeps the user's fields, the
// Services, PVCs, Secret and ConfigMap, errors for what a cluster would
// refuse, and the pods' shape checked against a pod a real API server
// accepted and stored.

#include "operator/trainingjob/desired_children.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <map>
#include <set>

#include "operator/testing/kube_test_support.h"
#include "operator/trainingjob/json_diff.h"
#include "operator/trainingjob/pod_template.h"
#include "services/api/training_job.h"

namespace gaptrain {
namespace trainingjob {
namespace {

using nlohmann::json;

constexpr char kUid[] = "ead6b621-1939-4817-8ffa-71c9621c5271";

json BaseJob() {
  json job = json::parse(R"j({
    "apiVersion": "gaptrain.io/v1alpha1", "kind": "TrainingJob",
    "metadata": {"name": "mnist", "namespace": "team-a", "generation": 1,
                 "resourceVersion": "215", "labels": {"team": "vision"}},
    "spec": {"data": {"format": "mnist-idx", "path": "/data/mnist", "shuffleSeed": 1},
             "training": {"batchSize": 128, "epochs": 4},
             "workers": {"replicas": 2}}})j");
  job["metadata"]["uid"] = kUid;
  return job;
}

struct Built {
  Status status;
  TrainingJob spec;
  DesiredChildren children;
};

Built Build(const json& job, const OperatorConfig& config = OperatorConfig()) {
  Built b;
  b.status = ParseTrainingJob(job.dump(), "test", &b.spec);
  if (!b.status.ok()) return b;
  std::array<uint8_t, 32> bytes{};
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 8 + 1);
  b.status = BuildDesiredChildren(job, b.spec, config, config.image, JobCredentials{bytes},
                                  &b.children);
  return b;
}

const json& PodNamed(const Built& b, const std::string& name) {
  for (const json& pod : b.children.pods) {
    if (pod["metadata"]["name"] == name) return pod;
  }
  ADD_FAILURE() << "no pod " << name;
  static const json none;
  return none;
}

const json kOwner = json::parse(std::string(R"j({"apiVersion": "gaptrain.io/v1alpha1",
    "kind": "TrainingJob", "name": "mnist", "uid": ")j") + kUid +
                                R"j(", "controller": true, "blockOwnerDeletion": true})j");

TEST(DesiredChildrenTest, GoldenTrainerPod) {
  const Built b = Build(BaseJob());
  ASSERT_TRUE(b.status.ok()) << b.status.ToString();
  ASSERT_EQ(b.children.pods.size(), 5u);  // master, coordinator, evaluator, 2 trainers
  json expected = json::parse(R"j({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "mnist-trainer-1", "namespace": "team-a",
                 "labels": {"team": "vision", "gaptrain.io/job-name": "mnist",
                            "gaptrain.io/replica-type": "trainer",
                            "gaptrain.io/replica-index": "1"}},
    "spec": {
      "containers": [{
        "name": "gaptrain", "image": "ghcr.io/gaptrain/gaptrain:0.1.0",
        "command": ["gaptrain-worker", "--job", "/etc/gaptrain/job.yaml", "--role", "trainer",
                    "--coordinator", "mnist-coordinator.team-a.svc:7071",
                    "--token-file", "/var/run/gaptrain/token", "--http-port", "9092",
                    "--host-name", "$(POD_NAME)", "--grace-seconds", "25"],
        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "POD_NAMESPACE",
                 "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "GAPTRAIN_CPU_REQUEST_MILLICORES",
                 "valueFrom": {"resourceFieldRef": {"resource": "requests.cpu", "divisor": "1m"}}},
                {"name": "GAPTRAIN_TOKEN_FILE", "value": "/var/run/gaptrain/token"},
                {"name": "GAPTRAIN_JOB", "value": "/etc/gaptrain/job.yaml"},
                {"name": "GAPTRAIN_ROLE", "value": "trainer"},
                {"name": "GAPTRAIN_COORDINATOR", "value": "mnist-coordinator.team-a.svc:7071"},
                {"name": "GAPTRAIN_HTTP_PORT", "value": "9092"},
                {"name": "GAPTRAIN_HOST_NAME", "value": "$(POD_NAME)"},
                {"name": "GAPTRAIN_GRACE_SECONDS", "value": "25"}],
        "ports": [{"name": "metrics", "containerPort": 9092, "protocol": "TCP"}],
        "volumeMounts": [{"name": "gaptrain-token", "mountPath": "/var/run/gaptrain",
                          "readOnly": true},
                         {"name": "gaptrain-job", "mountPath": "/etc/gaptrain", "readOnly": true}],
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": 9092}, "periodSeconds": 5,
                           "timeoutSeconds": 5, "failureThreshold": 3},
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": 9092}, "periodSeconds": 10,
                          "timeoutSeconds": 5, "failureThreshold": 12},
        "securityContext": {"allowPrivilegeEscalation": false,
                            "capabilities": {"drop": ["ALL"]}}}],
      "volumes": [{"name": "gaptrain-token", "secret": {"secretName": "mnist-token"}},
                  {"name": "gaptrain-job", "configMap": {"name": "mnist-job"}}],
      "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532,
                          "fsGroup": 65532, "fsGroupChangePolicy": "OnRootMismatch",
                          "seccompProfile": {"type": "RuntimeDefault"}},
      "restartPolicy": "Never",
      "terminationGracePeriodSeconds": 30}})j");
  expected["metadata"]["ownerReferences"] = json::array({kOwner});
  EXPECT_EQ(PodNamed(b, "mnist-trainer-1"), expected)
      << PodNamed(b, "mnist-trainer-1").dump(2);
}

TEST(DesiredChildrenTest, MasterCoordinatorAndEvaluator) {
  json job = BaseJob();
  job["spec"]["data"]["claimName"] = "mnist-data";
  const Built b = Build(job);
  ASSERT_TRUE(b.status.ok()) << b.status.ToString();

  const json& master = PodNamed(b, "mnist-master")["spec"]["containers"][0];
  EXPECT_EQ(master["command"],
            json::parse(R"j(["gaptrain-master", "--job", "/etc/gaptrain/job.yaml",
                "--listen", "0.0.0.0:7070", "--http-port", "9090",
                "--token-file", "/var/run/gaptrain/token",
                "--checkpoint-dir", "/var/lib/gaptrain/checkpoints"])j"));
  EXPECT_EQ(master["ports"], json::parse(R"j([{"name": "grpc", "containerPort": 7070, "protocol": "TCP"},
      {"name": "metrics", "containerPort": 9090, "protocol": "TCP"}])j"));
  EXPECT_EQ(master["readinessProbe"]["httpGet"]["port"], 9090);
  EXPECT_EQ(master["volumeMounts"], json::parse(R"j([
      {"name": "gaptrain-token", "mountPath": "/var/run/gaptrain", "readOnly": true},
      {"name": "gaptrain-job", "mountPath": "/etc/gaptrain", "readOnly": true},
      {"name": "gaptrain-data", "mountPath": "/data/mnist", "readOnly": true},
      {"name": "gaptrain-checkpoints", "mountPath": "/var/lib/gaptrain/checkpoints"}])j"));
  EXPECT_EQ(PodNamed(b, "mnist-master")["spec"]["volumes"], json::parse(R"j([
      {"name": "gaptrain-token", "secret": {"secretName": "mnist-token"}},
      {"name": "gaptrain-job", "configMap": {"name": "mnist-job"}},
      {"name": "gaptrain-data", "persistentVolumeClaim": {"claimName": "mnist-data", "readOnly": true}},
      {"name": "gaptrain-checkpoints", "persistentVolumeClaim": {"claimName": "mnist-checkpoints"}}])j"));
  EXPECT_EQ(PodNamed(b, "mnist-master")["metadata"]["labels"]["gaptrain.io/replica-index"], "0");

  const json& coordinator = PodNamed(b, "mnist-coordinator")["spec"]["containers"][0];
  EXPECT_EQ(coordinator["command"],
            json::parse(R"j(["gaptrain-coordinator", "--job", "/etc/gaptrain/job.yaml",
                "--listen", "0.0.0.0:7071", "--http-port", "9091",
                "--token-file", "/var/run/gaptrain/token",
                "--state-dir", "/var/lib/gaptrain/coordinator",
                "--master", "mnist-master.team-a.svc:7070"])j"));
  EXPECT_EQ(coordinator["volumeMounts"].back(),
            json::parse(R"j({"name": "gaptrain-state", "mountPath": "/var/lib/gaptrain/coordinator"})j"));
  EXPECT_EQ(PodNamed(b, "mnist-coordinator")["spec"]["volumes"].back(),
            json::parse(R"j({"name": "gaptrain-state",
                            "persistentVolumeClaim": {"claimName": "mnist-coordinator-state"}})j"));

  const json& evaluator = PodNamed(b, "mnist-evaluator")["spec"]["containers"][0];
  EXPECT_EQ(evaluator["command"][4], "evaluator");
  EXPECT_EQ(evaluator["volumeMounts"].back()["name"], "gaptrain-data");
  EXPECT_EQ(PodNamed(b, "mnist-evaluator")["metadata"]["labels"]["gaptrain.io/replica-type"],
            "evaluator");
}

// spec.master.shards: 2: each shard is a master of its own (pod, Service,
// claim, --shard), its claim where `--shard I` writes; the coordinator
// dials both in shard order; nothing else changes.
TEST(DesiredChildrenTest, TwoMasterShardsAreTwoMastersEachWithItsOwnClaim) {
  json job = BaseJob();
  job["spec"]["master"] = {{"shards", 2}, {"checkpoint", {{"volumeSize", "20Gi"}}}};
  const Built b = Build(job);
  ASSERT_TRUE(b.status.ok()) << b.status.ToString();
  std::vector<std::string> pods;
  for (const json& pod : b.children.pods) pods.push_back(pod["metadata"]["name"]);
  EXPECT_EQ(pods, (std::vector<std::string>{"mnist-master-0", "mnist-master-1",
                                            "mnist-coordinator", "mnist-evaluator",
                                            "mnist-trainer-0", "mnist-trainer-1"}));
  for (uint32_t shard : {0u, 1u}) {
    const std::string i = std::to_string(shard);
    SCOPED_TRACE("shard " + i);
    const json& pod = PodNamed(b, "mnist-master-" + i);
    EXPECT_EQ(pod["metadata"]["labels"]["gaptrain.io/replica-type"], "master");
    EXPECT_EQ(pod["metadata"]["labels"]["gaptrain.io/replica-index"], i);
    const json& master = pod["spec"]["containers"][0];
    json command = json::parse(R"j(["gaptrain-master", "--job", "/etc/gaptrain/job.yaml",
        "--listen", "0.0.0.0:7070", "--http-port", "9090",
        "--token-file", "/var/run/gaptrain/token",
        "--checkpoint-dir", "/var/lib/gaptrain/checkpoints", "--shard"])j");
    command.push_back(i);
    EXPECT_EQ(master["command"], command);
    EXPECT_EQ(master["volumeMounts"].back(),
              (json{{"name", "gaptrain-checkpoints"},
                    {"mountPath", "/var/lib/gaptrain/checkpoints/shard-" + i}}));
    EXPECT_EQ(pod["spec"]["volumes"].back(),
              (json{{"name", "gaptrain-checkpoints"},
                    {"persistentVolumeClaim", {{"claimName", "mnist-checkpoints-" + i}}}}));

    const json& service = b.children.services[shard];
    EXPECT_EQ(service["metadata"]["name"], "mnist-master-" + i);
    EXPECT_EQ(service["spec"]["selector"],
              (json{{"gaptrain.io/job-name", "mnist"},
                    {"gaptrain.io/replica-type", "master"},
                    {"gaptrain.io/replica-index", i}}));
    EXPECT_EQ(service["spec"]["ports"][0]["port"], 7070);

    const json& claim = b.children.persistent_volume_claims[shard];
    EXPECT_EQ(claim["metadata"]["name"], "mnist-checkpoints-" + i);
    EXPECT_EQ(claim["spec"]["resources"]["requests"]["storage"], "20Gi");
    EXPECT_EQ(claim["metadata"]["ownerReferences"][0], kOwner);
  }
  ASSERT_EQ(b.children.services.size(), 3u);
  EXPECT_EQ(b.children.services[2]["metadata"]["name"], "mnist-coordinator");
  ASSERT_EQ(b.children.persistent_volume_claims.size(), 3u);
  EXPECT_EQ(b.children.persistent_volume_claims[2]["metadata"]["name"],
            "mnist-coordinator-state");

  const json& coordinator = PodNamed(b, "mnist-coordinator")["spec"]["containers"][0]["command"];
  ASSERT_GE(coordinator.size(), 2u);
  EXPECT_EQ(coordinator[coordinator.size() - 2], "--master");
  EXPECT_EQ(coordinator.back(), "mnist-master-0.team-a.svc:7070,mnist-master-1.team-a.svc:7070");
  // The workers still dial the coordinator only (it hands them the shards).
  EXPECT_EQ(PodNamed(b, "mnist-trainer-0"), PodNamed(Build(BaseJob()), "mnist-trainer-0"));
}

// "-master-63" fits under the job name's limit, which "-coordinator" sets.
TEST(DesiredChildrenTest, SixtyFourShardsFitTheLongestJobName) {
  json job = BaseJob();
  job["metadata"]["name"] = "a" + std::string(kMaxClusterJobNameLength - 1, 'b');
  job["spec"]["master"] = {{"shards", 64}};
  const Built b = Build(job);
  ASSERT_TRUE(b.status.ok()) << b.status.ToString();
  ASSERT_EQ(b.children.services.size(), 65u);
  for (const json& service : b.children.services) {
    EXPECT_LE(service["metadata"]["name"].get<std::string>().size(), 63u);
  }
  EXPECT_EQ(b.children.services[63]["metadata"]["name"].get<std::string>(),
            job["metadata"]["name"].get<std::string>() + "-master-63");
}

TEST(DesiredChildrenTest, SpotPresetsOnPreemptibleWorkers) {
  struct Case {
    const char* preset;
    const char* label_key;
    const char* label_value;
    bool toleration;
  } cases[] = {
      {"gke", "cloud.google.com/gke-spot", "true", true},
      {"eks", "eks.amazonaws.com/capacityType", "SPOT", false},
      {"aks", "kubernetes.azure.com/scalesetpriority", "spot", true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.preset);
    OperatorConfig config;
    ASSERT_TRUE(SpotPreset(c.preset, &config.spot).ok());
    json job = BaseJob();
    job["spec"]["workers"]["preemptible"] = true;
    const Built b = Build(job, config);
    ASSERT_TRUE(b.status.ok()) << b.status.ToString();
    const json requirement = {{"key", c.label_key}, {"operator", "In"},
                              {"values", json::array({c.label_value})}};
    job["spec"]["evaluator"]["preemptible"] = true;  // with the trainers
    const Built both = Build(job, config);
    for (const char* worker : {"mnist-trainer-0", "mnist-evaluator"}) {
      const json& spec = PodNamed(both, worker)["spec"];
      EXPECT_EQ(spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"],
                json({{"nodeSelectorTerms",
                       json::array({{{"matchExpressions", json::array({requirement})}}})}}))
          << worker;
      if (c.toleration) {
        EXPECT_EQ(spec["tolerations"], json::array({{{"key", c.label_key},
                                                     {"operator", "Equal"},
                                                     {"value", c.label_value},
                                                     {"effect", "NoSchedule"}}}));
      } else {
        EXPECT_FALSE(spec.contains("tolerations"));
      }
    }
    // The evaluator's own default: on-demand nodes, as the job's state.
    for (const char* control : {"mnist-master", "mnist-coordinator", "mnist-evaluator"}) {
      const json& spec = PodNamed(b, control)["spec"];
      EXPECT_FALSE(spec.contains("tolerations")) << control;
      EXPECT_EQ(spec["affinity"],
                json({{"nodeAffinity",
                       {{"preferredDuringSchedulingIgnoredDuringExecution",
                         json::array({{{"weight", 100},
                                       {"preference",
                                        {{"matchExpressions",
                                          json::array({{{"key", c.label_key},
                                                        {"operator", "NotIn"},
                                                        {"values",
                                                         json::array({c.label_value})}}})}}}}})}}}}))
          << control;
    }
    // Not preemptible: trainers stay off spot nodes' taints and affinity.
    job["spec"]["workers"]["preemptible"] = false;
    const Built plain = Build(job, config);
    EXPECT_FALSE(PodNamed(plain, "mnist-trainer-0")["spec"].contains("affinity"));
    EXPECT_FALSE(PodNamed(plain, "mnist-trainer-0")["spec"].contains("tolerations"));
    EXPECT_TRUE(PodNamed(plain, "mnist-master")["spec"].contains("affinity"));
  }
  OperatorConfig none;
  json job = BaseJob();
  job["spec"]["workers"]["preemptible"] = true;
  const Built b = Build(job, none);
  EXPECT_FALSE(PodNamed(b, "mnist-trainer-0")["spec"].contains("affinity"));
  EXPECT_FALSE(PodNamed(b, "mnist-master")["spec"].contains("affinity"));
}

TEST(DesiredChildrenTest, TemplateMergeKeepsTheUsersFields) {
  OperatorConfig config;
  ASSERT_TRUE(SpotPreset("aks", &config.spot).ok());
  json job = BaseJob();
  job["spec"]["workers"]["preemptible"] = true;
  job["spec"]["workers"]["template"] = json::parse(R"j({
    "metadata": {"labels": {"app": "mnist", "gaptrain.io/job-name": "spoofed"},
                 "annotations": {"prometheus.io/scrape": "true"}},
    "spec": {
      "serviceAccountName": "trainer",
      "nodeSelector": {"cloud.google.com/gke-nodepool": "gpu", "accelerated": "true"},
      "terminationGracePeriodSeconds": 60,
      "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
      "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
          "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In",
                                                       "values": ["a"]}]},
                                {"matchExpressions": [{"key": "zone", "operator": "In",
                                                       "values": ["b"]}]}]}}},
      "volumes": [{"name": "scratch", "emptyDir": {}},
                  {"name": "gaptrain-job", "emptyDir": {}}],
      "containers": [
        {"name": "worker", "image": "registry.example.com/gaptrain:1.2",
         "args": ["--device", "cuda"],
         "resources": {"limits": {"nvidia.com/gpu": 1, "memory": "4Gi"}},
         "env": [{"name": "OMP_NUM_THREADS", "value": "4"},
                 {"name": "POD_NAME", "value": "spoofed"}],
         "ports": [{"name": "debug", "containerPort": 6060},
                   {"name": "other", "containerPort": 9092}],
         "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"},
                          {"name": "elsewhere", "mountPath": "/etc/gaptrain"}],
         "readinessProbe": {"tcpSocket": {"port": 9092}}},
        {"name": "log-shipper", "image": "fluent-bit:2",
         "env": [{"name": "GAPTRAIN_TOKEN_FILE", "value": "/nope"}]}]}})j");
  const Built b = Build(job, config);
  ASSERT_TRUE(b.status.ok()) << b.status.ToString();
  const json& pod = PodNamed(b, "mnist-trainer-0");
  const json& spec = pod["spec"];

  EXPECT_EQ(pod["metadata"]["labels"]["app"], "mnist");
  EXPECT_EQ(pod["metadata"]["labels"]["team"], "vision");
  EXPECT_EQ(pod["metadata"]["labels"]["gaptrain.io/job-name"], "mnist");
  EXPECT_EQ(pod["metadata"]["annotations"], json({{"prometheus.io/scrape", "true"}}));
  EXPECT_EQ(spec["serviceAccountName"], "trainer");
  EXPECT_EQ(spec["nodeSelector"]["accelerated"], "true");  // a string, as typed
  EXPECT_EQ(spec["terminationGracePeriodSeconds"], 60);
  EXPECT_EQ(spec["restartPolicy"], "Never");

  const json& c = spec["containers"][0];
  EXPECT_EQ(c["name"], "gaptrain");
  EXPECT_EQ(c["image"], "registry.example.com/gaptrain:1.2");
  EXPECT_EQ(c["args"], json::parse(R"j(["--device", "cuda"])j"));
  EXPECT_EQ(c["command"][0], "gaptrain-worker");
  EXPECT_EQ(c["command"].back(), "55");  // grace 60 - 5
  EXPECT_EQ(c["resources"]["limits"]["nvidia.com/gpu"], 1);
  EXPECT_EQ(c["env"][0]["valueFrom"]["fieldRef"]["fieldPath"], "metadata.name");
  EXPECT_EQ(c["env"].size(), 12u);  // gaptrain's five, the worker's six, OMP_NUM_THREADS
  EXPECT_EQ(c["env"][11]["name"], "OMP_NUM_THREADS");
  EXPECT_EQ(c["ports"], json::parse(R"j([{"name": "metrics", "containerPort": 9092, "protocol": "TCP"},
                                        {"name": "debug", "containerPort": 6060}])j"));
  EXPECT_EQ(c["volumeMounts"].size(), 3u);
  EXPECT_EQ(c["volumeMounts"][2], json::parse(R"j({"name": "scratch", "mountPath": "/scratch"})j"));
  EXPECT_EQ(c["readinessProbe"], json::parse(R"j({"tcpSocket": {"port": 9092}})j"));
  EXPECT_EQ(c["livenessProbe"]["httpGet"]["path"], "/healthz");

  const json& sidecar = spec["containers"][1];
  EXPECT_EQ(sidecar["name"], "log-shipper");
  EXPECT_EQ(sidecar["env"].size(), 5u);
  EXPECT_EQ(sidecar["env"][4], json::parse(R"j({"name": "GAPTRAIN_TOKEN_FILE",
                                               "value": "/var/run/gaptrain/token"})j"));
  EXPECT_EQ(sidecar["volumeMounts"].size(), 2u);
  EXPECT_FALSE(sidecar.contains("command"));

  EXPECT_EQ(spec["volumes"].size(), 3u);
  EXPECT_EQ(spec["volumes"][1]["configMap"]["name"], "mnist-job");
  EXPECT_EQ(spec["volumes"][2]["name"], "scratch");
  EXPECT_EQ(spec["tolerations"].size(), 2u);
  const json& terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                          ["nodeSelectorTerms"];
  ASSERT_EQ(terms.size(), 2u);
  for (const json& term : terms) {
    ASSERT_EQ(term["matchExpressions"].size(), 2u);
    EXPECT_EQ(term["matchExpressions"][1]["key"], "kubernetes.azure.com/scalesetpriority");
  }
  // The master's template is its own: none here.
  EXPECT_EQ(PodNamed(b, "mnist-master")["spec"]["containers"][0]["image"], "ghcr.io/gaptrain/gaptrain:0.1.0");
}

// Every pod meets PodSecurity "restricted" by default (the real server's
// admission is operator_process_test's RestrictedNamespaceAdmitsTheJobsPods);
// a template overrides field by field, and what it asks for that the API
// would refuse beside a default (privileged or SYS_ADMIN with
// allowPrivilegeEscalation false, uid 0 with runAsNonRoot) is left to it.
// A worker template whose first container sets `command` runs it as given
// (a user's trainer, e.g. the Python SDK): command, args and image are the
// user's; gaptrain still adds the env with the worker's settings, the
// token and job volumes, the data claim, ports, probes and security
// context.
// spec.model.fromTrainer: every replica holding a model runs the user's
// code, so both the workers' and the evaluator's templates need a command.
TEST(DesiredChildrenTest, ADeclaredModelNeedsTheUsersTrainersAndEvaluator) {
  json job = BaseJob();
  job["spec"]["model"] = {{"fromTrainer", true}};
  Built b = Build(job);
  EXPECT_EQ(b.status.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(b.status.message().find("spec.model.fromTrainer: spec.workers.template sets no "
                                    "command"),
            std::string::npos)
      << b.status.ToString();
  const json with_command = json::parse(
      R"j({"spec": {"containers": [{"command": ["python3", "/app/train.py"]}]}})j");
  job["spec"]["workers"]["template"] = with_command;
  b = Build(job);
  EXPECT_NE(b.status.message().find("spec.evaluator.template sets no command"),
            std::string::npos)
      << b.status.ToString();
  job["spec"]["evaluator"] = {{"template", with_command}};
  b = Build(job);
  ASSERT_TRUE(b.status.ok()) << b.status.ToString();
  EXPECT_EQ(PodNamed(b, "mnist-evaluator")["spec"]["containers"][0]["command"],
            with_command["spec"]["containers"][0]["command"]);
}

// A target on a metric gaptrain's evaluator does not report needs the
// user's evaluator.
TEST(DesiredChildrenTest, AUsersTargetMetricNeedsTheUsersEvaluator) {
  json job = BaseJob();
  job["spec"]["training"]["target"] = {{"metric", "top5_accuracy"}, {"atLeast", 0.9}};
  Built b = Build(job);
  EXPECT_EQ(b.status.message(), std::string(kRuleTargetMetricNeedsUsersEvaluator) +
                                    ", got 'top5_accuracy'");
  job["spec"]["evaluator"] = json::parse(
      R"j({"template": {"spec": {"containers": [{"command": ["python3", "/app/eval.py"]}]}}})j");
  EXPECT_TRUE(Build(job).status.ok());
  job = BaseJob();
  job["spec"]["training"]["target"] = {{"metric", "loss"}, {"atMost", 0.2}};
  EXPECT_TRUE(Build(job).status.ok());
}

TEST(DesiredChildrenTest, TemplateCommandRunsAsGiven) {
  json job = BaseJob();
  job["spec"]["data"] = json::parse(
      R"j({"format": "mnist-idx", "path": "/data/fashion-mnist", "claimName": "datasets"})j");
  job["spec"]["workers"]["template"] = json::parse(R"j({
    "spec": {"terminationGracePeriodSeconds": 40,
             "containers": [{"image": "registry.example.com/my-trainer:1",
                             "command": ["python3", "/app/train.py"],
                             "args": ["--epochs-hint", "4"],
                             "env": [{"name": "GAPTRAIN_ROLE", "value": "spoofed"},
                                     {"name": "PYTHONUNBUFFERED", "value": "1"}]}]}})j");
  const Built b = Build(job);
  ASSERT_TRUE(b.status.ok()) << b.status.ToString();
  const json& pod = PodNamed(b, "mnist-trainer-1");
  const json& c = pod["spec"]["containers"][0];
  EXPECT_EQ(c["name"], "gaptrain");
  EXPECT_EQ(c["image"], "registry.example.com/my-trainer:1");
  EXPECT_EQ(c["command"], json::parse(R"j(["python3", "/app/train.py"])j"));
  EXPECT_EQ(c["args"], json::parse(R"j(["--epochs-hint", "4"])j"));
  std::map<std::string, json> env;
  for (const json& e : c["env"]) {
    EXPECT_EQ(env.count(e["name"].get<std::string>()), 0u) << e.dump();
    env[e["name"].get<std::string>()] = e.contains("value") ? e["value"] : e["valueFrom"];
  }
  EXPECT_EQ(env["GAPTRAIN_JOB"], "/etc/gaptrain/job.yaml");
  EXPECT_EQ(env["GAPTRAIN_ROLE"], "trainer");  // gaptrain's wins
  EXPECT_EQ(env["GAPTRAIN_COORDINATOR"], "mnist-coordinator.team-a.svc:7071");
  EXPECT_EQ(env["GAPTRAIN_TOKEN_FILE"], "/var/run/gaptrain/token");
  EXPECT_EQ(env["GAPTRAIN_HTTP_PORT"], "9092");
  EXPECT_EQ(env["GAPTRAIN_HOST_NAME"], "$(POD_NAME)");
  EXPECT_EQ(env["GAPTRAIN_GRACE_SECONDS"], "35");  // 40 - 5
  EXPECT_EQ(env["PYTHONUNBUFFERED"], "1");
  // $(POD_NAME) expands only from a variable defined before it.
  size_t pod_name = 0, host_name = 0;
  for (size_t i = 0; i < c["env"].size(); ++i) {
    if (c["env"][i]["name"] == "POD_NAME") pod_name = i;
    if (c["env"][i]["name"] == "GAPTRAIN_HOST_NAME") host_name = i;
  }
  EXPECT_LT(pod_name, host_name);
  EXPECT_EQ(c["ports"], json::parse(R"j([{"name": "metrics", "containerPort": 9092,
                                          "protocol": "TCP"}])j"));
  EXPECT_EQ(c["readinessProbe"]["httpGet"]["port"], 9092);
  EXPECT_EQ(c["livenessProbe"]["httpGet"]["path"], "/healthz");
  EXPECT_EQ(c["securityContext"]["allowPrivilegeEscalation"], false);
  EXPECT_EQ(pod["spec"]["securityContext"]["runAsNonRoot"], true);
  std::set<std::string> mounts;
  for (const json& m : c["volumeMounts"]) mounts.insert(m["mountPath"].get<std::string>());
  EXPECT_EQ(mounts, (std::set<std::string>{"/var/run/gaptrain", "/etc/gaptrain",
                                           "/data/fashion-mnist"}));
  EXPECT_EQ(pod["spec"]["volumes"].size(), 3u);

  // The other pods are gaptrain's as ever; so is the evaluator without a
  // command of its own.
  EXPECT_EQ(PodNamed(b, "mnist-evaluator")["spec"]["containers"][0]["command"][0],
            "gaptrain-worker");
  EXPECT_EQ(PodNamed(b, "mnist-master")["spec"]["containers"][0]["command"][0],
            "gaptrain-master");

  // An empty command is no command: gaptrain-worker, the args appended.
  job["spec"]["workers"]["template"]["spec"]["containers"][0]["command"] = json::array();
  const Built plain = Build(job);
  ASSERT_TRUE(plain.status.ok()) << plain.status.ToString();
  const json& p = PodNamed(plain, "mnist-trainer-0")["spec"]["containers"][0];
  EXPECT_EQ(p["command"][0], "gaptrain-worker");
  EXPECT_EQ(p["args"], json::parse(R"j(["--epochs-hint", "4"])j"));
}

// The evaluator's settings, for an evaluator template with a command.
TEST(DesiredChildrenTest, EvaluatorTemplateCommandGetsTheEvaluatorsSettings) {
  json job = BaseJob();
  job["spec"]["evaluator"]["template"] = json::parse(
      R"j({"spec": {"containers": [{"command": ["python3", "/app/evaluate.py"]}]}})j");
  const Built b = Build(job);
  ASSERT_TRUE(b.status.ok()) << b.status.ToString();
  const json& c = PodNamed(b, "mnist-evaluator")["spec"]["containers"][0];
  EXPECT_EQ(c["command"], json::parse(R"j(["python3", "/app/evaluate.py"])j"));
  bool role = false;
  for (const json& e : c["env"]) {
    if (e["name"] == "GAPTRAIN_ROLE") role = e["value"] == "evaluator";
  }
  EXPECT_TRUE(role);
  EXPECT_EQ(PodNamed(b, "mnist-trainer-0")["spec"]["containers"][0]["command"][0],
            "gaptrain-worker");
}

TEST(DesiredChildrenTest, PodsAreRestrictedUnlessTheTemplateSaysOtherwise) {
  const json pod_defaults = json::parse(R"j({"runAsNonRoot": true, "runAsUser": 65532,
      "runAsGroup": 65532, "fsGroup": 65532, "fsGroupChangePolicy": "OnRootMismatch",
      "seccompProfile": {"type": "RuntimeDefault"}})j");
  const json container_defaults =
      json::parse(R"j({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}})j");
  {
    const Built b = Build(BaseJob());
    ASSERT_TRUE(b.status.ok()) << b.status.ToString();
    for (const json& pod : b.children.pods) {
      EXPECT_EQ(pod["spec"]["securityContext"], pod_defaults) << pod["metadata"]["name"];
      EXPECT_EQ(pod["spec"]["containers"][0]["securityContext"], container_defaults);
    }
  }

  json job = BaseJob();
  job["spec"]["workers"]["template"] = json::parse(R"j({"spec": {
      "securityContext": {"runAsUser": 1000, "seccompProfile": {"type": "Localhost",
                                                                "localhostProfile": "p.json"}},
      "initContainers": [{"name": "fetch", "image": "busybox",
                          "securityContext": {"capabilities": {"add": ["NET_BIND_SERVICE"]}}}],
      "containers": [
        {"name": "worker", "securityContext": {"readOnlyRootFilesystem": true,
                                               "capabilities": {"drop": []}}},
        {"name": "debugger", "image": "busybox", "securityContext": {"privileged": true}},
        {"name": "tuner", "image": "busybox",
         "securityContext": {"capabilities": {"add": ["CAP_SYS_ADMIN"]}}}]}})j");
  job["spec"]["master"]["template"] =
      json::parse(R"j({"spec": {"containers": [{"securityContext": {"runAsUser": 0}}]}})j");
  const Built b = Build(job);
  ASSERT_TRUE(b.status.ok()) << b.status.ToString();
  const json& trainer = PodNamed(b, "mnist-trainer-0")["spec"];
  EXPECT_EQ(trainer["securityContext"], json::parse(R"j({"runAsNonRoot": true,
      "runAsUser": 1000, "runAsGroup": 65532, "fsGroup": 65532,
      "fsGroupChangePolicy": "OnRootMismatch",
      "seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}})j"));
  EXPECT_EQ(trainer["initContainers"][0]["securityContext"], json::parse(R"j({
      "allowPrivilegeEscalation": false,
      "capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]}})j"));
  EXPECT_EQ(trainer["containers"][0]["securityContext"], json::parse(R"j({
      "allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
      "capabilities": {"drop": []}})j"));
  EXPECT_EQ(trainer["containers"][1]["securityContext"],
            json::parse(R"j({"privileged": true, "capabilities": {"drop": ["ALL"]}})j"));
  EXPECT_EQ(trainer["containers"][2]["securityContext"],
            json::parse(R"j({"capabilities": {"add": ["CAP_SYS_ADMIN"], "drop": ["ALL"]}})j"));
  // A master the template runs as root gets no runAsNonRoot to refuse it.
  const json& master = PodNamed(b, "mnist-master")["spec"];
  EXPECT_FALSE(master["securityContext"].contains("runAsNonRoot")) << master.dump(2);
  EXPECT_EQ(master["containers"][0]["securityContext"]["runAsUser"], 0);
  // Other replicas keep every default.
  EXPECT_EQ(PodNamed(b, "mnist-coordinator")["spec"]["securityContext"], pod_defaults);

  // A securityContext of the wrong shape is the template's error.
  json bad = BaseJob();
  bad["spec"]["workers"]["template"] =
      json::parse(R"j({"spec": {"containers": [{"securityContext": {"capabilities": []}}]}})j");
  Built refused = Build(bad);
  EXPECT_EQ(refused.status.message(),
            "spec.workers.template.spec.containers[0].securityContext.capabilities: must be an "
            "object");
  bad["spec"]["workers"]["template"] = json::parse(R"j({"spec": {"securityContext": 3}})j");
  refused = Build(bad);
  EXPECT_EQ(refused.status.message(), "spec.workers.template.spec.securityContext: must be an object");
}

TEST(DesiredChildrenTest, ServicesVolumesSecretAndConfigMap) {
  json job = BaseJob();
  job["spec"]["master"] = {{"checkpoint", {{"volumeSize", "20Gi"},
                                           {"storageClassName", "fast-ssd"}}}};
  const Built b = Build(job);
  ASSERT_TRUE(b.status.ok()) << b.status.ToString();
  ASSERT_EQ(b.children.services.size(), 2u);
  json expected_service = json::parse(R"j({
    "apiVersion": "v1", "kind": "Service",
    "metadata": {"name": "mnist-coordinator", "namespace": "team-a",
                 "labels": {"gaptrain.io/job-name": "mnist",
                            "gaptrain.io/replica-type": "coordinator"}},
    "spec": {"clusterIP": "None", "publishNotReadyAddresses": true,
             "selector": {"gaptrain.io/job-name": "mnist", "gaptrain.io/replica-type": "coordinator"},
             "ports": [{"name": "grpc", "port": 7071, "targetPort": 7071, "protocol": "TCP"},
                       {"name": "metrics", "port": 9091, "targetPort": 9091, "protocol": "TCP"}]}})j");
  expected_service["metadata"]["ownerReferences"] = json::array({kOwner});
  EXPECT_EQ(b.children.services[1], expected_service) << b.children.services[1].dump(2);
  EXPECT_EQ(b.children.services[0]["spec"]["ports"][0]["port"], 7070);

  ASSERT_EQ(b.children.persistent_volume_claims.size(), 2u);
  json expected_claim = json::parse(R"j({
    "apiVersion": "v1", "kind": "PersistentVolumeClaim",
    "metadata": {"name": "mnist-checkpoints", "namespace": "team-a",
                 "labels": {"gaptrain.io/job-name": "mnist"}},
    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "20Gi"}},
             "storageClassName": "fast-ssd"}})j");
  expected_claim["metadata"]["ownerReferences"] = json::array({kOwner});
  EXPECT_EQ(b.children.persistent_volume_claims[0], expected_claim);
  const json& state = b.children.persistent_volume_claims[1];
  EXPECT_EQ(state["metadata"]["name"], "mnist-coordinator-state");
  EXPECT_EQ(state["spec"]["resources"]["requests"]["storage"], "1Gi");
  EXPECT_FALSE(state["spec"].contains("storageClassName"));

  // Retained volumes have no owner, so deleting the job leaves them.
  job["spec"]["runPolicy"] = {{"volumeRetentionPolicy", "Retain"}};
  const Built retained = Build(job);
  for (const json& claim : retained.children.persistent_volume_claims) {
    EXPECT_FALSE(claim["metadata"].contains("ownerReferences"));
  }

  EXPECT_EQ(b.children.secret["metadata"]["name"], "mnist-token");
  const std::string token = b.children.secret["stringData"]["token"];
  EXPECT_EQ(token.size(), 64u);
  EXPECT_EQ(token.substr(0, 6), "010911");
  EXPECT_EQ(b.children.secret["metadata"]["ownerReferences"][0], kOwner);

  // job.yaml is the manifest the services parse, equal to the job's.
  EXPECT_EQ(b.children.config_map["metadata"]["name"], "mnist-job");
  const std::string yaml = b.children.config_map["data"]["job.yaml"];
  TrainingJob from_config;
  const Status parsed = ParseTrainingJob(yaml, "job.yaml", &from_config);
  ASSERT_TRUE(parsed.ok()) << parsed.ToString() << "\n" << yaml;
  EXPECT_EQ(from_config.name, "mnist");
  EXPECT_EQ(from_config.namespace_name, "team-a");
  EXPECT_EQ(from_config.workers.replicas, 2u);
  EXPECT_EQ(from_config.master.checkpoint.volume_size, "20Gi");
  EXPECT_EQ(yaml.find("resourceVersion"), std::string::npos);
}

// Into the job's pods only the job's own traffic: its pods to the master's
// and coordinator's gRPC ports, the operator's pods (its namespace, its
// label) to their HTTP ports, and with a Prometheus namespace its pods to
// every job pod's /metrics. Egress is not isolated.
TEST(DesiredChildrenTest, GoldenNetworkPolicy) {
  OperatorConfig config;
  config.network_policy.operator_namespace = "ops";
  const Built b = Build(BaseJob(), config);
  ASSERT_TRUE(b.status.ok()) << b.status.ToString();
  ASSERT_TRUE(b.children.network_policy.has_value());
  json expected = json::parse(R"j({
    "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
    "metadata": {"name": "mnist-ingress", "namespace": "team-a",
                 "labels": {"gaptrain.io/job-name": "mnist"}},
    "spec": {
      "podSelector": {"matchLabels": {"gaptrain.io/job-name": "mnist"}},
      "policyTypes": ["Ingress"],
      "ingress": [
        {"from": [{"podSelector": {"matchLabels": {"gaptrain.io/job-name": "mnist"}}}],
         "ports": [{"protocol": "TCP", "port": 7070}, {"protocol": "TCP", "port": 7071}]},
        {"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ops"}},
                   "podSelector": {"matchLabels": {"app.kubernetes.io/part-of": "gaptrain"}}}],
         "ports": [{"protocol": "TCP", "port": 9090}, {"protocol": "TCP", "port": 9091}]}]}})j");
  expected["metadata"]["ownerReferences"] = json::array({kOwner});
  EXPECT_EQ(*b.children.network_policy, expected) << b.children.network_policy->dump(2);
  // The ports are the pods' own.
  EXPECT_EQ(PodNamed(b, "mnist-master")["spec"]["containers"][0]["ports"][0]["containerPort"],
            7070);

  config.network_policy.prometheus_namespace = "monitoring";
  const json scraped = JobNetworkPolicy(BaseJob(), config.network_policy);
  ASSERT_EQ(scraped["spec"]["ingress"].size(), 3u);
  EXPECT_EQ(scraped["spec"]["ingress"][2], json::parse(R"j({
      "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}],
      "ports": [{"protocol": "TCP", "port": 9090}, {"protocol": "TCP", "port": 9091},
                {"protocol": "TCP", "port": 9092}]})j"));

  config.network_policy.enabled = false;
  const Built off = Build(BaseJob(), config);
  ASSERT_TRUE(off.status.ok());
  EXPECT_FALSE(off.children.network_policy.has_value());
}

TEST(DesiredChildrenTest, WhatAClusterWouldRefuseIsAnError) {
  struct Case {
    const char* name;
    std::function<void(json*)> change;
    const char* error;
  } cases[] = {
      {"long name", [](json* j) { (*j)["metadata"]["name"] = std::string(52, 'a'); },
       "metadata.name: on a cluster it must start with a letter and have at most 51 characters"},
      {"digit first", [](json* j) { (*j)["metadata"]["name"] = "1mnist"; },
       "metadata.name: on a cluster it must start with a letter"},
      {"relative data path",
       [](json* j) {
         (*j)["spec"]["data"]["claimName"] = "d";
         (*j)["spec"]["data"]["path"] = "data/mnist";
       },
       "spec.data.path: must be an absolute path when claimName is set"},
      {"template not an object",
       [](json* j) { (*j)["spec"]["workers"]["template"] = json::array(); },
       "spec.workers.template: must be a mapping"},
      {"containers not a list",
       [](json* j) { (*j)["spec"]["master"]["template"] = {{"spec", {{"containers", "x"}}}}; },
       "spec.master.template.spec.containers: must be a list"},
      {"sidecar without a name",
       [](json* j) {
         (*j)["spec"]["evaluator"]["template"] =
             json::parse(R"j({"spec": {"containers": [{"image": "a"}, {"image": "b"}]}})j");
       },
       "spec.evaluator.template.spec.containers[1].name: is required"},
      {"env not a list",
       [](json* j) {
         (*j)["spec"]["workers"]["template"] =
             json::parse(R"j({"spec": {"containers": [{"env": {"A": "1"}}]}})j");
       },
       "spec.workers.template.spec.containers[0].env: must be a list"},
      {"label not a string",
       [](json* j) {
         (*j)["spec"]["coordinator"]["template"] =
             json::parse(R"j({"metadata": {"labels": {"a": 1}}})j");
       },
       "spec.coordinator.template.metadata.labels.a: must be a string"},
      {"negative grace",
       [](json* j) {
         (*j)["spec"]["workers"]["template"] =
             json::parse(R"j({"spec": {"terminationGracePeriodSeconds": -1}})j");
       },
       "spec.workers.template.spec.terminationGracePeriodSeconds: must be a non-negative integer"},
      {"mount without a path",
       [](json* j) {
         (*j)["spec"]["workers"]["template"] =
             json::parse(R"j({"spec": {"containers": [{"volumeMounts": [{"name": "x"}]}]}})j");
       },
       "spec.workers.template.spec.containers[0].volumeMounts[0].mountPath: is required"},
      {"bad affinity",
       [](json* j) {
         (*j)["spec"]["workers"]["template"] = json::parse(
             R"j({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                 {"nodeSelectorTerms": [{"matchExpressions": "x"}]}}}}})j");
       },
       "nodeSelectorTerms[0].matchExpressions: must be a list"},
  };
  for (const Case& c : cases) {
    json job = BaseJob();
    c.change(&job);
    const Built b = Build(job);
    EXPECT_EQ(b.status.code(), Status::Code::kInvalidArgument) << c.name;
    EXPECT_NE(b.status.message().find(c.error), std::string::npos)
        << c.name << ": " << b.status.message();
  }
}

TEST(DesiredChildrenTest, CheckPodTemplateOnItsOwn) {
  EXPECT_TRUE(CheckPodTemplate(nullptr, "t").ok());
  EXPECT_TRUE(CheckPodTemplate(json::object(), "t").ok());
  EXPECT_EQ(CheckPodTemplate(json::array(), "t").message(),
            "t: must be a PodTemplateSpec object");
  EXPECT_EQ(CheckPodTemplate(json::parse(R"j({"spec": {"volumes": [{"emptyDir": {}}]}})j"), "t")
                .message(),
            "t.spec.volumes[0].name: is required");
  EXPECT_EQ(TemplateGracePeriod(json::parse(R"j({"spec": {"terminationGracePeriodSeconds": 7}})j")),
            7);
  EXPECT_FALSE(TemplateGracePeriod(json::parse(R"j({"spec": {}})j")).has_value());
}

// Every path the two objects share holds the same JSON type; list items
// are matched by name where they have one.
void ExpectSameTypes(const json& ours, const json& server, const std::string& path) {
  if (ours.is_number() && server.is_number()) return;
  ASSERT_EQ(ours.type_name(), std::string(server.type_name())) << path;
  if (ours.is_object()) {
    for (const auto& [key, value] : ours.items()) {
      if (server.contains(key)) ExpectSameTypes(value, server[key], path + "." + key);
    }
  } else if (ours.is_array()) {
    for (size_t i = 0; i < ours.size(); ++i) {
      for (size_t k = 0; k < server.size(); ++k) {
        const bool named = ours[i].is_object() && ours[i].contains("name");
        if (named ? server[k].is_object() && server[k].value("name", "") == ours[i]["name"]
                  : k == i) {
          ExpectSameTypes(ours[i], server[k], path + "[" + std::to_string(i) + "]");
        }
      }
    }
  }
}

json OutputJob() {
  json job = BaseJob();
  job["spec"]["output"] = {{"claimName", "models"}, {"path", "mnist/model.pt"}};
  return job;
}

json ExportPodOf(const json& job, std::optional<double> accuracy = std::nullopt,
                 const OperatorConfig& config = OperatorConfig(), Status* status = nullptr) {
  TrainingJob spec;
  const Status parsed = ParseTrainingJob(job.dump(), "test", &spec);
  EXPECT_TRUE(parsed.ok()) << parsed.ToString();
  json pod;
  const Status built = BuildExportPod(job, spec, config, config.image, accuracy, &pod);
  if (status != nullptr) {
    *status = built;
  } else {
    EXPECT_TRUE(built.ok()) << built.ToString();
  }
  return pod;
}

TEST(DesiredChildrenTest, GoldenExportPod) {
  OperatorConfig config;
  ASSERT_TRUE(SpotPreset("gke", &config.spot).ok());
  const json pod = ExportPodOf(OutputJob(), 0.9871, config);
  json expected = json::parse(R"j({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "mnist-export", "namespace": "team-a",
                 "labels": {"team": "vision", "gaptrain.io/job-name": "mnist",
                            "gaptrain.io/replica-type": "export"},
                 "annotations": {"gaptrain.io/output": "models:mnist/model.pt"}},
    "spec": {
      "containers": [{
        "name": "gaptrain", "image": "ghcr.io/gaptrain/gaptrain:0.1.0",
        "command": ["gaptrain", "export", "--checkpoint-dir", "/var/lib/gaptrain/checkpoints",
                    "-o", "/var/lib/gaptrain/output/mnist/model.pt", "--mkdir",
                    "--card", "/var/lib/gaptrain/output/mnist/model.pt.json",
                    "--job", "/etc/gaptrain/job.yaml", "--test-accuracy", "0.9871"],
        "env": [],
        "ports": [],
        "volumeMounts": [{"name": "gaptrain-job", "mountPath": "/etc/gaptrain", "readOnly": true},
                         {"name": "gaptrain-checkpoints",
                          "mountPath": "/var/lib/gaptrain/checkpoints", "readOnly": true},
                         {"name": "gaptrain-output", "mountPath": "/var/lib/gaptrain/output"}],
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "securityContext": {"allowPrivilegeEscalation": false,
                            "capabilities": {"drop": ["ALL"]}}}],
      "volumes": [{"name": "gaptrain-job", "configMap": {"name": "mnist-job"}},
                  {"name": "gaptrain-checkpoints",
                   "persistentVolumeClaim": {"claimName": "mnist-checkpoints", "readOnly": true}},
                  {"name": "gaptrain-output", "persistentVolumeClaim": {"claimName": "models"}}],
      "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
          {"weight": 100, "preference": {"matchExpressions": [
              {"key": "cloud.google.com/gke-spot", "operator": "NotIn", "values": ["true"]}]}}]}},
      "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532,
                          "fsGroup": 65532, "fsGroupChangePolicy": "OnRootMismatch",
                          "seccompProfile": {"type": "RuntimeDefault"}},
      "restartPolicy": "Never",
      "terminationGracePeriodSeconds": 30}})j");
  expected["metadata"]["ownerReferences"] = json::array({kOwner});
  EXPECT_EQ(pod, expected) << pod.dump(2);

  // Without a known accuracy the card records none.
  const json command = ExportPodOf(OutputJob())["spec"]["containers"][0]["command"];
  EXPECT_EQ(command.back(), "/etc/gaptrain/job.yaml");
}

// With two shards each claim is mounted where its master wrote it, under
// the one --checkpoint-dir `gaptrain export` is given.
TEST(DesiredChildrenTest, ExportPodMountsEveryShardsClaim) {
  json job = OutputJob();
  job["spec"]["master"] = {{"shards", 2}};
  const json pod = ExportPodOf(job);
  const json& container = pod["spec"]["containers"][0];
  EXPECT_EQ(container["command"][3], "/var/lib/gaptrain/checkpoints");
  EXPECT_EQ(container["volumeMounts"], json::parse(R"j([
      {"name": "gaptrain-job", "mountPath": "/etc/gaptrain", "readOnly": true},
      {"name": "gaptrain-checkpoints-0", "mountPath": "/var/lib/gaptrain/checkpoints/shard-0",
       "readOnly": true},
      {"name": "gaptrain-checkpoints-1", "mountPath": "/var/lib/gaptrain/checkpoints/shard-1",
       "readOnly": true},
      {"name": "gaptrain-output", "mountPath": "/var/lib/gaptrain/output"}])j"));
  EXPECT_EQ(pod["spec"]["volumes"], json::parse(R"j([
      {"name": "gaptrain-job", "configMap": {"name": "mnist-job"}},
      {"name": "gaptrain-checkpoints-0",
       "persistentVolumeClaim": {"claimName": "mnist-checkpoints-0", "readOnly": true}},
      {"name": "gaptrain-checkpoints-1",
       "persistentVolumeClaim": {"claimName": "mnist-checkpoints-1", "readOnly": true}},
      {"name": "gaptrain-output", "persistentVolumeClaim": {"claimName": "models"}}])j"));
}

// The master's template fits a pod that reads the master's volume (image,
// resources, placement, extra volumes); what only a master needs goes.
TEST(DesiredChildrenTest, ExportPodTakesTheMastersTemplateLessItsArgsProbesAndSidecars) {
  json job = OutputJob();
  job["spec"]["master"]["template"] = json::parse(R"j({
    "metadata": {"annotations": {"team/cost-center": "42"}},
    "spec": {
      "nodeSelector": {"pool": "stable"},
      "securityContext": {"runAsUser": 1000},
      "terminationGracePeriodSeconds": 90,
      "containers": [
        {"name": "master", "image": "registry.example/gaptrain:dev",
         "args": ["--update-threads", "4"],
         "resources": {"requests": {"cpu": "2", "memory": "1Gi"}},
         "readinessProbe": {"tcpSocket": {"port": 7070}},
         "livenessProbe": {"tcpSocket": {"port": 7070}},
         "env": [{"name": "TZ", "value": "UTC"}]},
        {"name": "log-shipper", "image": "fluent-bit"}]}})j");
  const json pod = ExportPodOf(job, 0.5);
  const json& spec = pod["spec"];
  ASSERT_EQ(spec["containers"].size(), 1u) << "a sidecar would keep the pod from completing";
  const json& c = spec["containers"][0];
  EXPECT_EQ(c["image"], "registry.example/gaptrain:dev");
  EXPECT_EQ(c["resources"]["requests"]["cpu"], "2");
  EXPECT_EQ(c["env"], json::parse(R"j([{"name": "TZ", "value": "UTC"}])j"));
  EXPECT_EQ(c["command"][0], "gaptrain");
  for (const char* gone : {"args", "readinessProbe", "livenessProbe"}) {
    EXPECT_FALSE(c.contains(gone)) << gone;
  }
  EXPECT_EQ(spec["nodeSelector"]["pool"], "stable");
  EXPECT_EQ(spec["terminationGracePeriodSeconds"], 90);
  EXPECT_EQ(spec["securityContext"]["runAsUser"], 1000);  // the template wins
  EXPECT_EQ(spec["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
  EXPECT_EQ(pod["metadata"]["annotations"],
            json::parse(R"j({"team/cost-center": "42",
                             "gaptrain.io/output": "models:mnist/model.pt"})j"));
  // The master's own pod keeps them all.
  const Built b = Build(job);
  ASSERT_TRUE(b.status.ok()) << b.status.ToString();
  EXPECT_EQ(PodNamed(b, "mnist-master")["spec"]["containers"].size(), 2u);
  EXPECT_TRUE(PodNamed(b, "mnist-master")["spec"]["containers"][0].contains("args"));
  // Only the export pod is built by BuildExportPod: the job's children never hold it.
  for (const json& p : b.children.pods) EXPECT_NE(p["metadata"]["name"], "mnist-export");
}

TEST(DesiredChildrenTest, ExportPodErrorsNameTheField) {
  Status s;
  ExportPodOf(BaseJob(), std::nullopt, OperatorConfig(), &s);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "spec.output: set both claimName and path, or neither");
  json job = OutputJob();
  job["spec"]["master"]["template"] = {{"spec", {{"containers", "x"}}}};
  ExportPodOf(job, std::nullopt, OperatorConfig(), &s);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "spec.master.template.spec.containers: must be a list");
}

TEST(DesiredChildrenTest, PodsHaveTheShapeARealServerAccepted) {
  kube::Recording r;
  const Status loaded = kube::LoadRecording("pod-server-side-apply", &r);
  ASSERT_TRUE(loaded.ok()) << loaded.ToString();
  json stored = r.response_body;  // what kube-apiserver v1.26 stored for an applied pod
  stored["spec"]["containers"][0]["name"] = "gaptrain";

  OperatorConfig config;
  ASSERT_TRUE(SpotPreset("aks", &config.spot).ok());
  json job = BaseJob();
  job["spec"]["workers"]["preemptible"] = true;
  job["spec"]["data"]["claimName"] = "data";
  const Built b = Build(job, config);
  ASSERT_TRUE(b.status.ok()) << b.status.ToString();
  // The fields of core/v1 PodSpec and Container gaptrain may write.
  const std::set<std::string> pod_spec_fields = {
      "containers", "volumes", "restartPolicy", "terminationGracePeriodSeconds", "tolerations",
      "affinity", "securityContext"};
  const std::set<std::string> container_fields = {
      "name", "image", "command", "env", "ports", "volumeMounts", "readinessProbe",
      "livenessProbe", "securityContext"};
  for (const json& pod : b.children.pods) {
    SCOPED_TRACE(pod["metadata"]["name"].get<std::string>());
    ExpectSameTypes(pod, stored, "pod");
    for (const auto& [key, value] : pod["spec"].items()) {
      EXPECT_EQ(pod_spec_fields.count(key), 1u) << key;
    }
    for (const auto& [key, value] : pod["spec"]["containers"][0].items()) {
      EXPECT_EQ(container_fields.count(key), 1u) << key;
    }
    for (const auto& [key, value] : pod["metadata"].items()) {
      EXPECT_TRUE(stored["metadata"].contains(key)) << key;
    }
  }
  // The export pod: the same shape, with an annotation and the
  // container's terminationMessagePolicy.
  json export_job = job;
  export_job["spec"]["output"] = {{"claimName", "models"}, {"path", "model.pt"}};
  const json export_pod = ExportPodOf(export_job, 0.98, config);
  ExpectSameTypes(export_pod, stored, "pod");
  for (const auto& [key, value] : export_pod["spec"].items()) {
    EXPECT_EQ(pod_spec_fields.count(key), 1u) << key;
  }
  for (const auto& [key, value] : export_pod["spec"]["containers"][0].items()) {
    EXPECT_TRUE(container_fields.count(key) == 1 || key == "terminationMessagePolicy") << key;
  }
  EXPECT_TRUE(stored["spec"]["containers"][0]["terminationMessagePolicy"].is_string());
  EXPECT_TRUE(export_pod["metadata"]["annotations"].is_object());
  // The recorded pod is one of ours: its applied fields match our trainer's.
  json ours = PodNamed(b, "mnist-trainer-0");
  EXPECT_EQ(ours["metadata"]["ownerReferences"][0]["apiVersion"],
            stored["metadata"]["ownerReferences"][0]["apiVersion"]);
  EXPECT_TRUE(IsSubset(stored["metadata"]["labels"], ours["metadata"]["labels"]));
}

// Where the cluster assigns pods' ids (--pod-ids cluster, OpenShift), no
// pod names a user, group or fsGroup, and every other restriction stays.
TEST(DesiredChildrenTest, PodsNameNoIdsWhereTheClusterAssignsThem) {
  OperatorConfig config;
  config.fixed_pod_ids = false;
  const json pod_defaults =
      json::parse(R"j({"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}})j");
  const json container_defaults =
      json::parse(R"j({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}})j");
  const Built b = Build(BaseJob(), config);
  ASSERT_TRUE(b.status.ok()) << b.status.ToString();
  ASSERT_FALSE(b.children.pods.empty());
  for (const json& pod : b.children.pods) {
    EXPECT_EQ(pod["spec"]["securityContext"], pod_defaults) << pod["metadata"]["name"];
    EXPECT_EQ(pod["spec"]["containers"][0]["securityContext"], container_defaults);
  }
  const json exporter = ExportPodOf(OutputJob(), 0.98, config);
  EXPECT_EQ(exporter["spec"]["securityContext"], pod_defaults);
}

// gaptrain's container gets the image it is given (the job's, which the
// reconcile chooses), not the operator's config.image; a template that
// names its own keeps it; the export pod alike.
TEST(DesiredChildrenTest, PodsGetTheJobsImageUnlessTheirTemplateNamesOne) {
  OperatorConfig config;
  config.image = "ghcr.io/gaptrain/gaptrain:0.2.0";  // the operator's, upgraded
  const std::string job_image = "ghcr.io/gaptrain/gaptrain:0.1.0";
  json job = OutputJob();
  job["spec"]["evaluator"]["template"]["spec"]["containers"] =
      json::array({{{"image", "registry.example.com/evaluator:3"}}});
  TrainingJob spec;
  ASSERT_TRUE(ParseTrainingJob(job.dump(), "test", &spec).ok());
  DesiredChildren children;
  const Status built = BuildDesiredChildren(job, spec, config, job_image, {}, &children);
  ASSERT_TRUE(built.ok()) << built.ToString();
  ASSERT_EQ(children.pods.size(), 5u);
  for (const json& pod : children.pods) {
    const json& container = pod["spec"]["containers"][0];
    EXPECT_EQ(container["image"], pod["metadata"]["name"] == "mnist-evaluator"
                                      ? "registry.example.com/evaluator:3"
                                      : job_image)
        << pod["metadata"]["name"];
  }
  json exporter;
  ASSERT_TRUE(BuildExportPod(job, spec, config, job_image, 0.98, &exporter).ok());
  EXPECT_EQ(exporter["spec"]["containers"][0]["image"], job_image);
}

// The operator's pull secrets (--image-pull-secrets) reach every pod, after
// those the template names and without naming one twice.
TEST(DesiredChildrenTest, ImagePullSecretsFollowTheTemplatesOnce) {
  OperatorConfig config;
  config.image_pull_secrets = {"regcred", "mirror"};
  json job = OutputJob();
  job["spec"]["workers"]["template"]["spec"]["imagePullSecrets"] =
      json::parse(R"j([{"name": "mirror"}, {"name": "team-registry"}])j");
  const Built b = Build(job, config);
  ASSERT_TRUE(b.status.ok()) << b.status.ToString();
  const json ours = json::parse(R"j([{"name": "regcred"}, {"name": "mirror"}])j");
  EXPECT_EQ(PodNamed(b, "mnist-master")["spec"]["imagePullSecrets"], ours);
  EXPECT_EQ(PodNamed(b, "mnist-evaluator")["spec"]["imagePullSecrets"], ours);
  for (const char* trainer : {"mnist-trainer-0", "mnist-trainer-1"}) {
    EXPECT_EQ(PodNamed(b, trainer)["spec"]["imagePullSecrets"],
              json::parse(R"j([{"name": "mirror"}, {"name": "team-registry"},
                               {"name": "regcred"}])j"))
        << trainer;
  }
  EXPECT_EQ(ExportPodOf(job, 0.98, config)["spec"]["imagePullSecrets"], ours);
  // None given, none named: the field stays absent (the golden pods).
  EXPECT_FALSE(PodNamed(Build(OutputJob()), "mnist-master")["spec"].contains("imagePullSecrets"));
  // A template's own list alone is kept as it is.
  json own = OutputJob();
  own["spec"]["master"]["template"]["spec"]["imagePullSecrets"] =
      json::parse(R"j([{"name": "team-registry"}])j");
  EXPECT_EQ(PodNamed(Build(own), "mnist-master")["spec"]["imagePullSecrets"],
            json::parse(R"j([{"name": "team-registry"}])j"));
  // Not a list of objects: an error naming the field.
  json bad = OutputJob();
  bad["spec"]["master"]["template"]["spec"]["imagePullSecrets"] = json::array({"regcred"});
  EXPECT_EQ(Build(bad, config).status.message(),
            "spec.master.template.spec.imagePullSecrets[0]: must be an object");
}

// In-cluster TLS: the job's Secret NAME-tls, the servers serving it, every
// caller trusting it, a user's trainer command told where it is.
TEST(DesiredChildrenTest, WithTlsEveryGrpcHopIsTls) {
  const json job = BaseJob();
  TrainingJob spec;
  ASSERT_TRUE(ParseTrainingJob(job.dump(), "test", &spec).ok());
  const OperatorConfig config;
  const JobTls tls{"-----BEGIN CERTIFICATE-----\nMII...\n", "-----BEGIN PRIVATE KEY-----\n"};
  DesiredChildren d;
  JobCredentials credentials;
  credentials.tls = &tls;
  ASSERT_TRUE(BuildDesiredChildren(job, spec, config, config.image, credentials, &d).ok());
  ASSERT_TRUE(d.tls_secret.has_value());
  EXPECT_EQ((*d.tls_secret)["metadata"]["name"], "mnist-tls");
  EXPECT_EQ((*d.tls_secret)["metadata"]["ownerReferences"][0]["uid"], kUid);
  EXPECT_EQ((*d.tls_secret)["type"], "kubernetes.io/tls");
  EXPECT_EQ((*d.tls_secret)["stringData"]["tls.crt"], tls.cert_pem);
  EXPECT_EQ((*d.tls_secret)["stringData"]["ca.crt"], tls.cert_pem);  // its own CA
  EXPECT_EQ((*d.tls_secret)["stringData"]["tls.key"], tls.key_pem);

  auto command = [&](const std::string& pod) {
    for (const json& p : d.pods) {
      if (p["metadata"]["name"] == pod) return p["spec"]["containers"][0]["command"];
    }
    return json();
  };
  auto has_flag = [](const json& cmd, const std::string& flag, const std::string& value) {
    for (size_t i = 0; i + 1 < cmd.size(); ++i) {
      if (cmd[i] == flag && cmd[i + 1] == value) return true;
    }
    return false;
  };
  const std::string dir = kTlsDir;
  EXPECT_TRUE(has_flag(command("mnist-master"), "--tls-cert", dir + "/tls.crt"));
  EXPECT_TRUE(has_flag(command("mnist-master"), "--tls-key", dir + "/tls.key"));
  EXPECT_TRUE(has_flag(command("mnist-coordinator"), "--tls-cert", dir + "/tls.crt"));
  EXPECT_TRUE(has_flag(command("mnist-coordinator"), "--master-ca", dir + "/ca.crt"));
  for (const char* caller : {"mnist-trainer-0", "mnist-evaluator"}) {
    EXPECT_TRUE(has_flag(command(caller), "--coordinator-ca", dir + "/ca.crt")) << caller;
    EXPECT_TRUE(has_flag(command(caller), "--master-ca", dir + "/ca.crt")) << caller;
  }
  for (const json& pod : d.pods) {
    bool mounted = false, volume = false, env = false;
    for (const json& m : pod["spec"]["containers"][0]["volumeMounts"]) {
      mounted = mounted || (m["name"] == "gaptrain-tls" && m["mountPath"] == dir);
    }
    for (const json& v : pod["spec"]["volumes"]) {
      volume = volume || v.value("secret", json::object()).value("secretName", "") == "mnist-tls";
    }
    for (const json& e : pod["spec"]["containers"][0].value("env", json::array())) {
      env = env || (e["name"] == "GAPTRAIN_MASTER_CA" && e["value"] == dir + "/ca.crt");
    }
    EXPECT_TRUE(mounted && volume) << pod["metadata"]["name"];
    const std::string type = pod["metadata"]["labels"]["gaptrain.io/replica-type"];
    EXPECT_EQ(env, type == "trainer" || type == "evaluator") << pod["metadata"]["name"];
  }
  // The names the pods dial, short and qualified.
  const std::vector<std::string> names = JobTlsNames(job, 1);
  EXPECT_NE(std::find(names.begin(), names.end(), "mnist-master.team-a.svc"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "mnist-coordinator.team-a.svc"), names.end());
  // Each master shard's Service, in every form, and no unsharded master.
  EXPECT_EQ(JobTlsNames(job, 2),
            (std::vector<std::string>{
                "mnist-master-0", "mnist-master-0.team-a", "mnist-master-0.team-a.svc",
                "mnist-master-0.team-a.svc.cluster.local", "mnist-master-1",
                "mnist-master-1.team-a", "mnist-master-1.team-a.svc",
                "mnist-master-1.team-a.svc.cluster.local", "mnist-coordinator",
                "mnist-coordinator.team-a", "mnist-coordinator.team-a.svc",
                "mnist-coordinator.team-a.svc.cluster.local"}));

  // Without: plaintext, no Secret, no flag.
  const Built plain = Build(job);
  EXPECT_FALSE(plain.children.tls_secret.has_value());
  EXPECT_FALSE(has_flag(PodNamed(plain, "mnist-master")["spec"]["containers"][0]["command"],
                        "--tls-cert", dir + "/tls.crt"));
}

}  // namespace
}  // namespace trainingjob
}  // namespace gaptrain
