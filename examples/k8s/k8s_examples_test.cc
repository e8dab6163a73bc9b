// examples/k8s: every TrainingJob parses with the parser `gaptrain run`
// uses and as the operator parses the object it reads from the API server,
// validates against the CRD, and becomes pods (the operator's own
// BuildDesiredChildren, with the GKE spot preset) that mount the dataset's
// claim where the data path says; that claim is one datasets.yaml and
// datasets-rwx.yaml create and the loader pod fills at that path; and that
// write their model (spec.output) to the claim models.yaml creates, which
// the export pod mounts and model-reader.yaml reads. The examples cover
// what docs/install.md promises: MNIST and Fashion-MNIST with GA+DANA on
// spot workers, and sync with backup workers.

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <array>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "deploy/manifest_checks.h"
#include "operator/crd/schema_check.h"
#include "operator/trainingjob/desired_children.h"
#include "operator/trainingjob/operator_config.h"
#include "operator/trainingjob/spot_scheduling.h"
#include "services/api/training_job.h"
#include "services/testing/test_files.h"
#include "services/testing/yaml_to_json.h"

namespace gaptrain {
namespace {

using nlohmann::json;

const char kDir[] = "examples/k8s";

std::vector<json> Objects(const std::string& file) {
  std::vector<json> objects;
  const Status s = ParseManifests(ReadRaw(file), &objects);
  EXPECT_TRUE(s.ok()) << file << ": " << s.ToString();
  return objects;
}

std::vector<std::string> JobFiles() {
  std::vector<std::string> jobs;
  for (const std::string& file : FilesEndingIn(kDir, ".yaml")) {
    const std::vector<json> objects = Objects(file);
    if (objects.size() == 1 && objects[0]["kind"] == "TrainingJob") jobs.push_back(file);
  }
  return jobs;
}

// claim name -> where the loader pod mounts it, in a datasets file.
std::map<std::string, std::string> LoaderMounts(const std::string& file) {
  const std::vector<json> objects = Objects(file);
  const json loader = FindObject(objects, "Pod", "dataset-loader");
  std::map<std::string, std::string> claim_of_volume, mounts;
  for (const json& v : loader["spec"]["volumes"]) {
    claim_of_volume[v["name"]] = v["persistentVolumeClaim"]["claimName"];
  }
  for (const json& m : loader["spec"]["containers"][0]["volumeMounts"]) {
    const std::string claim = claim_of_volume[m["name"]];
    EXPECT_FALSE(FindObject(objects, "PersistentVolumeClaim", claim).is_null())
        << file << ": the loader mounts " << claim << ", which the file does not create";
    mounts[claim] = m["mountPath"];
  }
  return mounts;
}

TEST(K8sExamplesTest, EveryFileHoldsNamedObjects) {
  const std::vector<std::string> files = FilesEndingIn(kDir, ".yaml");
  ASSERT_GE(files.size(), 5u);
  for (const std::string& file : files) {
    const std::vector<json> objects = Objects(file);
    for (const std::string& problem : IdentityProblems(objects)) ADD_FAILURE() << file << ": " << problem;
  }
  // Both datasets files create the same claims, mounted alike.
  EXPECT_EQ(LoaderMounts("examples/k8s/datasets.yaml"), LoaderMounts("examples/k8s/datasets-rwx.yaml"));
  for (const json& claim : Objects("examples/k8s/datasets-rwx.yaml")) {
    if (claim["kind"] == "PersistentVolumeClaim") {
      EXPECT_EQ(claim["spec"]["accessModes"], json::array({"ReadWriteMany"})) << claim.dump();
    }
  }
}

TEST(K8sExamplesTest, JobsParseValidateAndMountTheirDataset) {
  const YAML::Node schema = YAML::LoadFile("deploy/crd/gaptrain.io_trainingjobs.yaml")["spec"]
                                ["versions"][0]["schema"]["openAPIV3Schema"];
  const std::map<std::string, std::string> mounts = LoaderMounts("examples/k8s/datasets.yaml");
  trainingjob::OperatorConfig config;
  config.image = "ghcr.io/gaptrain/gaptrain:0.1.0";
  ASSERT_TRUE(trainingjob::ParseSpotScheduling("gke", "--spot-preset", &config.spot).ok());

  const std::vector<json> models = Objects("examples/k8s/models.yaml");
  std::set<std::string> covered, model_paths;
  const std::vector<std::string> files = JobFiles();
  ASSERT_GE(files.size(), 3u);
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    // As `gaptrain run -f` reads it, and against the CRD as the API server
    // would check it.
    TrainingJob local;
    const Status loaded = LoadTrainingJob(file, &local);
    ASSERT_TRUE(loaded.ok()) << loaded.ToString();
    EXPECT_EQ(CheckAgainstSchema(schema, YAML::LoadFile(file)), std::vector<std::string>{});

    // As the operator reads the object back from the API server.
    json object;
    ASSERT_TRUE(kube_testing::YamlToJson(ReadRaw(file), &object).ok());
    object["metadata"]["namespace"] = "default";
    object["metadata"]["uid"] = "0b4c1d2e-8f00-4a5b-9c6d-7e8f9a0b1c2d";
    TrainingJob spec;
    const Status parsed = ParseTrainingJob(object.dump(), file, &spec);
    ASSERT_TRUE(parsed.ok()) << parsed.ToString();
    trainingjob::DesiredChildren children;
    const Status built = trainingjob::BuildDesiredChildren(
        object, spec, config, config.image, trainingjob::JobCredentials(), &children);
    ASSERT_TRUE(built.ok()) << built.ToString();

    // The dataset: a claim the datasets file creates, filled at the path
    // the job reads, mounted there read-only in every pod.
    ASSERT_TRUE(mounts.count(spec.data.claim_name)) << "claim " << spec.data.claim_name;
    EXPECT_EQ(mounts.at(spec.data.claim_name), spec.data.path);
    for (const json& pod : children.pods) {
      std::string volume;
      for (const json& v : pod["spec"]["volumes"]) {
        if (v.contains("persistentVolumeClaim") &&
            v["persistentVolumeClaim"]["claimName"] == spec.data.claim_name) {
          volume = v["name"];
        }
      }
      bool mounted = false;
      for (const json& m : pod["spec"]["containers"][0]["volumeMounts"]) {
        mounted |= m["name"] == volume && m["mountPath"] == spec.data.path && m["readOnly"] == true;
      }
      EXPECT_TRUE(mounted) << pod["metadata"]["name"] << " does not mount the dataset";
    }

    // Spot workers: trainers tolerate and require GKE spot nodes, and keep
    // the template's resources.
    EXPECT_TRUE(spec.workers.preemptible);
    const json& trainer = children.pods.back();
    EXPECT_EQ(trainer["metadata"]["labels"]["gaptrain.io/replica-type"], "trainer");
    EXPECT_NE(trainer["spec"]["tolerations"].dump().find("cloud.google.com/gke-spot"), std::string::npos);
    EXPECT_EQ(trainer["spec"]["containers"][0]["resources"]["requests"]["cpu"], "500m");

    // The model: written to the claim models.yaml creates, each job to a
    // file of its own, by an export pod that mounts it.
    EXPECT_FALSE(FindObject(models, "PersistentVolumeClaim", spec.output.claim_name).is_null())
        << "claim " << spec.output.claim_name;
    EXPECT_EQ(spec.output.path, spec.name + ".pt");
    EXPECT_TRUE(model_paths.insert(spec.output.path).second) << spec.output.path;
    json export_pod;
    const Status exported =
        trainingjob::BuildExportPod(object, spec, config, config.image, 0.99, &export_pod);
    ASSERT_TRUE(exported.ok()) << exported.ToString();
    EXPECT_NE(export_pod["spec"]["volumes"].dump().find("\"claimName\":\"" +
                                                        spec.output.claim_name + "\""),
              std::string::npos);

    const std::string dataset = spec.data.path.substr(spec.data.path.rfind('/') + 1);
    if (spec.training.mode == "sync") {
      EXPECT_GE(spec.training.sync.backup_workers, 1u);
      if (spec.training.sync.backup_workers >= 1) covered.insert(dataset + " sync+backups");
    } else {
      covered.insert(dataset + " " + spec.training.staleness.rule);
    }
  }
  for (const char* want : {"mnist gap-aware-dana", "fashion-mnist gap-aware-dana", "mnist sync+backups"}) {
    EXPECT_TRUE(covered.count(want)) << "no example for " << want;
  }
}

// The loader pods carry what PodSecurity "restricted" asks of a pod, so a
// hardened namespace admits them (operator_process_test applies both files
// to a real API server enforcing it).
TEST(K8sExamplesTest, TheHelperPodsMeetPodSecurityRestricted) {
  for (const auto& [file, name] :
       {std::pair<const char*, const char*>{"examples/k8s/datasets.yaml", "dataset-loader"},
        {"examples/k8s/datasets-rwx.yaml", "dataset-loader"},
        {"examples/k8s/model-reader.yaml", "model-reader"}}) {
    SCOPED_TRACE(file);
    const json loader = FindObject(Objects(file), "Pod", name);
    ASSERT_TRUE(loader.is_object());
    const json& pod = loader["spec"]["securityContext"];
    EXPECT_EQ(pod["runAsNonRoot"], true);
    EXPECT_NE(pod["runAsUser"], 0);
    EXPECT_EQ(pod["seccompProfile"]["type"], "RuntimeDefault");
    EXPECT_EQ(pod["fsGroup"], 65532) << "the job pods' group, so it can write a fresh volume";
    for (const char* host : {"hostNetwork", "hostPID", "hostIPC"}) {
      EXPECT_FALSE(loader["spec"].contains(host)) << host;
    }
    for (const json& c : loader["spec"]["containers"]) {
      EXPECT_EQ(c["securityContext"]["allowPrivilegeEscalation"], false);
      EXPECT_EQ(c["securityContext"]["capabilities"]["drop"], json::array({"ALL"}));
      EXPECT_FALSE(c["securityContext"].contains("privileged"));
    }
  }
}

// The reader mounts the models claim read-only at /models, where the
// `kubectl cp` it documents reads the example's model and its card.
TEST(K8sExamplesTest, TheModelReaderReadsTheModelsClaim) {
  const json reader = FindObject(Objects("examples/k8s/model-reader.yaml"), "Pod", "model-reader");
  ASSERT_TRUE(reader.is_object());
  ASSERT_EQ(reader["spec"]["volumes"].size(), 1u);
  EXPECT_EQ(reader["spec"]["volumes"][0]["persistentVolumeClaim"],
            json::parse(R"j({"claimName": "models", "readOnly": true})j"));
  const json& mount = reader["spec"]["containers"][0]["volumeMounts"][0];
  EXPECT_EQ(mount["mountPath"], "/models");
  EXPECT_EQ(mount["readOnly"], true);
  const std::string text = ReadRaw("examples/k8s/model-reader.yaml");
  for (const char* command :
       {"kubectl cp model-reader:/models/mnist-gap-aware-dana.pt mnist-gap-aware-dana.pt",
        "kubectl cp model-reader:/models/mnist-gap-aware-dana.pt.json "
        "mnist-gap-aware-dana.pt.json"}) {
    EXPECT_NE(text.find(command), std::string::npos) << command;
  }
}

// docs/install.md walks through these files: each is named there, and the
// loading commands are the ones datasets.yaml documents.
TEST(K8sExamplesTest, InstallGuideUsesEveryExample) {
  const std::string guide = ReadRaw("docs/install.md");
  ASSERT_FALSE(guide.empty());
  for (const std::string& file : FilesEndingIn(kDir, ".yaml")) {
    EXPECT_NE(guide.find(file), std::string::npos) << file << " is not in docs/install.md";
  }
  for (const char* command :
       {"kubectl wait --for=condition=Ready pod/dataset-loader",
        "kubectl cp \"$f\" dataset-loader:/data/$d/$(basename \"$f\")",
        "kubectl delete pod dataset-loader", "kubectl get tj -w"}) {
    EXPECT_NE(guide.find(command), std::string::npos) << command;
    if (std::string(command) != "kubectl get tj -w") {
      EXPECT_NE(ReadRaw("examples/k8s/datasets.yaml").find(command), std::string::npos)
          << "datasets.yaml should document " << command;
    }
  }
  // And the model's way out, as model-reader.yaml documents it.
  for (const char* command :
       {"kubectl apply -f examples/k8s/models.yaml",
        "kubectl wait --for=condition=Ready pod/model-reader",
        "kubectl cp model-reader:/models/mnist-gap-aware-dana.pt mnist-gap-aware-dana.pt",
        "kubectl delete pod model-reader"}) {
    EXPECT_NE(guide.find(command), std::string::npos) << command;
  }
}

}  // namespace
}  // namespace gaptrain
