// The Python trainer example's jobs (examples/python/): job-local.yaml
// parses, `gaptrain run` would run its trainers as `/usr/bin/python3
// <examples/python>/train.py`, and its TorchScript and data are where its
// paths say (from the checkout's root, as every example's); job-cluster.yaml
// parses and the operator's trainer pods run the image's script as given,
// with the data claim and the worker's settings in the environment.

#include <gtest/gtest.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <array>
#include <map>
#include <string>
#include <vector>

#include "cli/run/template_command.h"
#include "operator/trainingjob/desired_children.h"
#include "operator/trainingjob/spot_scheduling.h"
#include "services/api/training_job.h"
#include "services/testing/test_files.h"
#include "services/testing/testdata_dir.h"
#include "services/testing/yaml_to_json.h"

namespace gaptrain {
namespace {

using nlohmann::json;

// The checkout (the runfile README.md links into it).
std::string Workspace() {
  char buf[PATH_MAX];
  if (::realpath("README.md", buf) == nullptr) return "";
  const std::string path = buf;
  return path.substr(0, path.rfind('/'));
}

TEST(PythonExamplesTest, LocalJobRunsTrainPyBesideIt) {
  const std::string file = "examples/python/job-local.yaml";
  TrainingJob job;
  Status s = ParseTrainingJob(ReadRaw(file), file, &job);
  ASSERT_TRUE(s.ok()) << s.ToString();
  // As `gaptrain run -f examples/python/job-local.yaml` in the checkout.
  const std::string root = Workspace();
  ASSERT_FALSE(root.empty());
  TemplateCommand command;
  s = TemplateTrainerCommand(job, root + "/" + JobFileDir(file), "/usr/bin:/bin", &command);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(command.argv.size(), 2u);
  EXPECT_EQ(command.argv[0], "/usr/bin/python3");
  EXPECT_EQ(command.argv[1], root + "/examples/python/train.py");
  EXPECT_EQ(job.workers.replicas, 4u);
  EXPECT_EQ(job.training.staleness.rule, "gap-aware-dana");
  // The job's own paths are relative to the checkout's root, where
  // `gaptrain run` is started.
  EXPECT_EQ(job.model.torchscript, "examples/python/fashion_cnn.pt");
  EXPECT_EQ(ReadRaw(root + "/" + job.model.torchscript).substr(0, 2), "PK")
      << "python3 examples/python/export_model.py writes it";
  std::string data;
  ASSERT_TRUE(FindSharedDataDir(&data).ok());
  EXPECT_EQ(job.data.path, "../shared/data/fashion-mnist");
  EXPECT_EQ(access((root + "/" + job.data.path + "/train-images-idx3-ubyte.gz").c_str(), R_OK),
            0);
}

TEST(PythonExamplesTest, ClusterJobRunsTheImagesScript) {
  const std::string file = "examples/python/job-cluster.yaml";
  const std::string text = ReadRaw(file);
  TrainingJob spec;
  Status s = ParseTrainingJob(text, file, &spec);
  ASSERT_TRUE(s.ok()) << s.ToString();
  json job;
  s = kube_testing::YamlToJson(text, &job);
  ASSERT_TRUE(s.ok()) << s.ToString();
  job["metadata"]["namespace"] = "default";
  job["metadata"]["uid"] = "5e0c9b7e-3d1f-4c55-9a0e-2f6d8b1c4a77";
  trainingjob::DesiredChildren children;
  s = trainingjob::BuildDesiredChildren(job, spec, trainingjob::OperatorConfig(),
                                       trainingjob::OperatorConfig().image,
                                       trainingjob::JobCredentials(), &children);
  ASSERT_TRUE(s.ok()) << s.ToString();
  int trainers = 0;
  for (const json& pod : children.pods) {
    const json& c = pod["spec"]["containers"][0];
    const std::string type = pod["metadata"]["labels"]["gaptrain.io/replica-type"];
    // The model's TorchScript is in the image: every pod that loads it
    // runs the user's image.
    if (type != "coordinator") {
      EXPECT_EQ(c["image"], "registry.example.com/gaptrain-fashion-cnn:0.1.0") << type;
    }
    if (type != "trainer") continue;
    ++trainers;
    EXPECT_EQ(c["command"], json::parse(R"j(["python3", "/app/train.py"])j"));
    EXPECT_FALSE(c.contains("args"));
    std::map<std::string, std::string> env;
    for (const json& e : c["env"]) {
      if (e.contains("value")) env[e["name"]] = e["value"];
    }
    EXPECT_EQ(env["GAPTRAIN_JOB"], "/etc/gaptrain/job.yaml");
    EXPECT_EQ(env["GAPTRAIN_COORDINATOR"], "python-fashion-cnn-coordinator.default.svc:7071");
    EXPECT_EQ(env["GAPTRAIN_HOST_NAME"], "$(POD_NAME)");
    bool data_mounted = false;
    for (const json& m : c["volumeMounts"]) data_mounted |= m["mountPath"] == spec.data.path;
    EXPECT_TRUE(data_mounted);
  }
  EXPECT_EQ(trainers, 4);
  EXPECT_EQ(spec.model.torchscript, "/app/fashion_cnn.pt");
}

// examples/torchvision: no spec.model (the first trainer declares
// torchvision's ResNet-18), and the same script as trainers and evaluator.
TEST(PythonExamplesTest, TorchvisionJobsDeclareTheirModelAndEvaluateWithTheScript) {
  const std::string root = Workspace();
  ASSERT_FALSE(root.empty());
  const std::string local = "examples/torchvision/job-local.yaml";
  TrainingJob job;
  Status s = ParseTrainingJob(ReadRaw(local), local, &job);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(job.model.from_trainer);
  EXPECT_TRUE(job.model.torchscript.empty());
  for (bool evaluator : {false, true}) {
    TemplateCommand command;
    s = evaluator ? TemplateEvaluatorCommand(job, root + "/" + JobFileDir(local),
                                             "/usr/bin:/bin", &command)
                  : TemplateTrainerCommand(job, root + "/" + JobFileDir(local), "/usr/bin:/bin",
                                           &command);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(command.argv, (std::vector<std::string>{
                                "/usr/bin/python3", root + "/examples/torchvision/train.py"}));
  }

  const std::string cluster = "examples/torchvision/job-cluster.yaml";
  const std::string text = ReadRaw(cluster);
  TrainingJob spec;
  s = ParseTrainingJob(text, cluster, &spec);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(spec.model.from_trainer);
  json object;
  s = kube_testing::YamlToJson(text, &object);
  ASSERT_TRUE(s.ok()) << s.ToString();
  object["metadata"]["namespace"] = "default";
  object["metadata"]["uid"] = "0d1c6a4e-8f3b-4b1e-9d7a-5c2e4f6a8b90";
  trainingjob::DesiredChildren children;
  s = trainingjob::BuildDesiredChildren(object, spec, trainingjob::OperatorConfig(),
                                       trainingjob::OperatorConfig().image,
                                       trainingjob::JobCredentials(), &children);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::map<std::string, int> scripts;  // replica type -> pods running the image's script
  for (const json& pod : children.pods) {
    const json& c = pod["spec"]["containers"][0];
    const std::string type = pod["metadata"]["labels"]["gaptrain.io/replica-type"];
    if (c["command"] == json::parse(R"j(["python3", "/app/train.py"])j")) {
      EXPECT_EQ(c["image"], "registry.example.com/gaptrain-resnet18:0.1.0") << type;
      ++scripts[type];
    }
  }
  EXPECT_EQ(scripts, (std::map<std::string, int>{{"evaluator", 1}, {"trainer", 4}}));
}

// examples/torchvision/job-gpu-spot.yaml placed per role (issue 39) under
// the operator's eks preset: the trainers on spot nodes (the preset's
// required affinity) with one GPU each and the GPU pool's toleration, the
// evaluator, the master and the coordinator preferring on-demand nodes,
// with no GPU and no toleration.
TEST(PythonExamplesTest, TheGpuSpotJobPutsTrainersOnSpotGpusAndTheRestOnDemand) {
  const std::string file = "examples/torchvision/job-gpu-spot.yaml";
  const std::string text = ReadRaw(file);
  TrainingJob spec;
  Status s = ParseTrainingJob(text, file, &spec);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(spec.workers.preemptible);
  EXPECT_FALSE(spec.evaluator.preemptible);
  json object;
  s = kube_testing::YamlToJson(text, &object);
  ASSERT_TRUE(s.ok()) << s.ToString();
  object["metadata"]["namespace"] = "default";
  object["metadata"]["uid"] = "0d1c6a4e-8f3b-4b1e-9d7a-5c2e4f6a8b90";
  trainingjob::OperatorConfig config;
  ASSERT_TRUE(trainingjob::SpotPreset("eks", &config.spot).ok());
  trainingjob::DesiredChildren children;
  s = trainingjob::BuildDesiredChildren(object, spec, config, config.image,
                                       trainingjob::JobCredentials(), &children);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const json spot = {{"key", "eks.amazonaws.com/capacityType"},
                     {"operator", "In"},
                     {"values", json::array({"SPOT"})}};
  const json on_demand = {{"key", "eks.amazonaws.com/capacityType"},
                          {"operator", "NotIn"},
                          {"values", json::array({"SPOT"})}};
  std::map<std::string, int> placed;  // replica type -> pods checked
  for (const json& pod : children.pods) {
    const std::string type = pod["metadata"]["labels"]["gaptrain.io/replica-type"];
    SCOPED_TRACE(type);
    json pod_spec = pod["spec"];  // a copy: a field it lacks reads as null
    json node_affinity = pod_spec["affinity"]["nodeAffinity"];
    json limits = pod_spec["containers"][0]["resources"]["limits"];
    if (type == "trainer") {
      EXPECT_EQ(node_affinity["requiredDuringSchedulingIgnoredDuringExecution"]
                             ["nodeSelectorTerms"][0]["matchExpressions"],
                json::array({spot}));
      EXPECT_EQ(limits["nvidia.com/gpu"], 1);
      EXPECT_EQ(pod_spec["tolerations"],
                json::parse(R"j([{"key": "nvidia.com/gpu", "operator": "Exists",
                                  "effect": "NoSchedule"}])j"));
      EXPECT_EQ(pod_spec["containers"][0]["args"], json::parse(R"j(["--device", "cuda"])j"));
    } else {
      EXPECT_FALSE(node_affinity.contains("requiredDuringSchedulingIgnoredDuringExecution"));
      EXPECT_EQ(node_affinity["preferredDuringSchedulingIgnoredDuringExecution"][0]["preference"]
                             ["matchExpressions"],
                json::array({on_demand}));
      EXPECT_FALSE(limits.is_object() && limits.contains("nvidia.com/gpu"));
      EXPECT_FALSE(pod_spec.contains("tolerations"));
    }
    ++placed[type];
  }
  EXPECT_EQ(placed, (std::map<std::string, int>{
                        {"coordinator", 1}, {"evaluator", 1}, {"master", 1}, {"trainer", 4}}));
}

}  // namespace
}  // namespace gaptrain
