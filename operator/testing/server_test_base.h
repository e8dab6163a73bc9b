// What the fake API server's tests share: the recorded CRD from
// ../shared/k8s, valid TrainingJob and Pod bodies, and a fixture that starts
// a server with that CRD and a bearer token and holds a client for it.

#ifndef GAPTRAIN_OPERATOR_TESTING_SERVER_TEST_BASE_H_
#define GAPTRAIN_OPERATOR_TESTING_SERVER_TEST_BASE_H_

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <memory>
#include <string>

#include "operator/testing/fake_api_server.h"
#include "operator/testing/test_client.h"
#include "services/testing/testdata_dir.h"

namespace gaptrain {
namespace kube_testing {

// The text of ../shared/k8s/example-crd-accepted.yaml; fails the test
// when it cannot be read.
std::string ExampleCrdYaml();

// A TrainingJob the example CRD accepts (the recorded "mnist" job).
nlohmann::json TrainingJobBody(const std::string& name, int replicas = 4);
// A Pod with one container; `node` sets spec.nodeName when not empty.
nlohmann::json PodBody(const std::string& name, const nlohmann::json& labels = nlohmann::json::object(),
                       const std::string& node = "");

constexpr char kTestToken[] = "test-token";
constexpr char kJobs[] = "/apis/gaptrain.io/v1alpha1/namespaces/default/trainingjobs";
constexpr char kPods[] = "/api/v1/namespaces/default/pods";
// How long tests wait for what should happen at once (only a failing test
// waits this long).
constexpr std::chrono::seconds kWait(10);

// The paths of one TrainingJob and one Pod in "default".
inline std::string JobPath(const std::string& name) { return std::string(kJobs) + "/" + name; }
inline std::string PodPath(const std::string& name) { return std::string(kPods) + "/" + name; }

class FakeApiServerTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  // Options for the server SetUp starts; override to change them.
  virtual void Configure(FakeApiServer::Options* options) {}

  // Opens a watch on `target` (relative to the server), failing the test
  // when it cannot.
  std::unique_ptr<WatchReader> OpenWatch(const std::string& target);

  std::unique_ptr<FakeApiServer> server_;
  std::unique_ptr<TestClient> client_;
};

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_SERVER_TEST_BASE_H_
