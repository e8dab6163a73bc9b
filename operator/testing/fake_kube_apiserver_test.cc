// fake-kube-apiserver as a process: it writes its port and a kubeconfig,
// serves the API with the token and the CRDs it was given, and stops on
// SIGTERM; bad flags stop the start.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/wait.h>

#include <cstdlib>
#include <string>

#include "operator/testing/server_test_base.h"
#include "operator/testing/test_client.h"
#include "services/testing/test_processes.h"

namespace gaptrain {
namespace kube_testing {
namespace {

using nlohmann::json;

const char kBinary[] = "operator/testing/fake-kube-apiserver";

TEST(FakeKubeApiserverProcessTest, ServesUntilSigterm) {
  const std::string dir = TestTempDir("fake_kube_apiserver");
  const std::string kubeconfig = dir + "/kubeconfig";
  const std::string crd = SharedK8sDir() + "/example-crd-accepted.yaml";
  ChildProcess server(kBinary,
                      {"--token", "secret", "--kubeconfig", kubeconfig, "--crd", crd,
                       "--namespace", "team-a"},
                      dir + "/ports", dir + "/log", "", 1);
  ASSERT_TRUE(server.started()) << ReadWholeFile(dir + "/log");
  const std::string config = ReadWholeFile(kubeconfig);
  EXPECT_NE(config.find("server: http://127.0.0.1:" + std::to_string(server.port(0))), std::string::npos)
      << config;
  EXPECT_NE(config.find("token: secret"), std::string::npos) << config;
  EXPECT_NE(config.find("namespace: team-a"), std::string::npos) << config;

  TestClient client(static_cast<uint16_t>(server.port(0)), "secret");
  TestResponse discovery = client.Get("/apis/gaptrain.io/v1alpha1");
  ASSERT_EQ(discovery.status, 200) << discovery.body;
  EXPECT_EQ(discovery.json["resources"][0]["name"], "trainingjobs");
  EXPECT_EQ(client.Post(kJobs, TrainingJobBody("mnist")).status, 201);
  EXPECT_EQ(TestClient(static_cast<uint16_t>(server.port(0)), "").Get(kJobs).status, 403);

  EXPECT_EQ(server.Kill(SIGTERM), 0) << ReadWholeFile(dir + "/log");
}

TEST(FakeKubeApiserverProcessTest, BadFlagsStopTheStart) {
  auto run = [](const std::string& args) {
    const std::string cmd = std::string(kBinary) + " " + args + " >/dev/null 2>&1";
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  EXPECT_EQ(run("--port 70000"), 2);
  EXPECT_EQ(run("--crd /nonexistent.yaml"), 2);
  EXPECT_EQ(run("--no-auth --token x"), 2);
  EXPECT_EQ(run("--bogus"), 2);
  EXPECT_EQ(run("--address 10.255.255.1 --port 1"), 1);  // not a local address
  EXPECT_EQ(run("--help"), 0);
}

}  // namespace
}  // namespace kube_testing
}  // namespace gaptrain
