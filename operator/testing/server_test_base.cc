#include "operator/testing/server_test_base.h"

#include "services/testing/test_files.h"
#include "services/testing/testdata_dir.h"

namespace gaptrain {
namespace kube_testing {

using nlohmann::json;

std::string ExampleCrdYaml() {
  const std::string path = SharedK8sDir() + "/example-crd-accepted.yaml";
  const std::string text = ReadRaw(path);
  EXPECT_FALSE(text.empty()) << "cannot read " << path;
  return text;
}

json TrainingJobBody(const std::string& name, int replicas) {
  return {{"apiVersion", "gaptrain.io/v1alpha1"},
          {"kind", "TrainingJob"},
          {"metadata", {{"name", name}, {"namespace", "default"}, {"labels", {{"team", "a"}}}}},
          {"spec",
           {{"data", {{"path", "/data/mnist"}}},
            {"training", {{"epochs", 4}, {"optimizer", {{"learningRate", 0.05}}}}},
            {"workers",
             {{"replicas", replicas},
              {"preemptible", true},
              {"template",
               {{"spec",
                 {{"containers", json::array({{{"name", "worker"}, {"image", "gaptrain:dev"}}})}}}}}}}}}};
}

json PodBody(const std::string& name, const json& labels, const std::string& node) {
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", name}, {"labels", labels}}},
              {"spec",
               {{"restartPolicy", "Never"},
                {"containers", json::array({{{"name", "worker"}, {"image", "gaptrain:dev"}}})}}}};
  if (!node.empty()) pod["spec"]["nodeName"] = node;
  return pod;
}

void FakeApiServerTest::SetUp() {
  FakeApiServer::Options options;
  options.bearer_token = kTestToken;
  options.custom_resource_definitions = {ExampleCrdYaml()};
  Configure(&options);
  Status s = FakeApiServer::Start(options, &server_);
  ASSERT_TRUE(s.ok()) << s.ToString();
  client_ = std::make_unique<TestClient>(server_->port(), options.bearer_token);
}

void FakeApiServerTest::TearDown() {
  client_.reset();
  if (server_ != nullptr) server_->Stop();
}

std::unique_ptr<WatchReader> FakeApiServerTest::OpenWatch(const std::string& target) {
  std::unique_ptr<WatchReader> reader;
  Status s = WatchReader::Open(server_->port(), kTestToken, target, std::chrono::seconds(10),
                               &reader);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return reader;
}

}  // namespace kube_testing
}  // namespace gaptrain
