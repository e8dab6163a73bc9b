#include "services/coordinator/coordinator_options.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

namespace gaptrain {
namespace {

Status Parse(std::vector<std::string> args, CoordinatorOptions* o) {
  return ParseCoordinatorFlags(args, o);
}

TEST(CoordinatorOptionsTest, DefaultsAndEveryFlag) {
  unsetenv("GAPTRAIN_TOKEN");
  CoordinatorOptions o;
  ASSERT_TRUE(Parse({"--job", "j.yaml", "--insecure-no-token"}, &o).ok());
  EXPECT_EQ(o.server.listen, "0.0.0.0:7071");
  EXPECT_EQ(o.server.http_port, 9091);
  EXPECT_EQ(o.state_dir, "coordinator-state");
  EXPECT_EQ(o.task_batches, 200u);
  EXPECT_EQ(o.no_worker_timeout_seconds, 600u);
  EXPECT_EQ(o.master_timeout_seconds, 300u);
  EXPECT_TRUE(o.master.empty());
  EXPECT_TRUE(o.masters.empty());

  const std::string token_file = std::string(std::getenv("TEST_TMPDIR")) + "/token";
  std::ofstream(token_file) << "s3cret\n";
  ASSERT_TRUE(Parse({"--job", "j.yaml", "--listen", "127.0.0.1:0", "--http-address", "::1",
                     "--http-port", "0", "--token-file", token_file, "--master", "master:7070",
                     "--state-dir", "/tmp/x", "--train-samples", "60000", "--task-batches", "50",
                     "--no-worker-timeout-seconds", "0", "--master-timeout-seconds", "30",
                     "--ports-file", "/tmp/p"},
                    &o)
                  .ok());
  EXPECT_EQ(o.server.token, "s3cret");
  EXPECT_EQ(o.master, "master:7070");
  EXPECT_EQ(o.masters, (std::vector<std::string>{"master:7070"})) << "one master: shard 0 of 1";
  EXPECT_EQ(o.train_samples, 60000u);
  EXPECT_EQ(o.task_batches, 50u);
  EXPECT_EQ(o.no_worker_timeout_seconds, 0u);
  EXPECT_EQ(o.master_timeout_seconds, 30u);
  EXPECT_EQ(o.status_token, "");  // /status open

  const std::string status_token_file = std::string(std::getenv("TEST_TMPDIR")) + "/status";
  std::ofstream(status_token_file) << "read-me\n";
  ASSERT_TRUE(Parse({"--job", "j.yaml", "--insecure-no-token", "--status-token-file",
                     status_token_file},
                    &o)
                  .ok());
  EXPECT_EQ(o.status_token, "read-me");
  const Status missing = Parse({"--job", "j.yaml", "--insecure-no-token",
                                "--status-token-file", status_token_file + ".absent"},
                               &o);
  EXPECT_NE(missing.message().find("--status-token-file"), std::string::npos)
      << missing.ToString();

  setenv("GAPTRAIN_TOKEN", "from-env", 1);
  ASSERT_TRUE(Parse({"--job", "j.yaml"}, &o).ok());
  EXPECT_EQ(o.server.token, "from-env");
  unsetenv("GAPTRAIN_TOKEN");
}

TEST(CoordinatorOptionsTest, MasterTakesOneAddressPerShard) {
  unsetenv("GAPTRAIN_TOKEN");
  CoordinatorOptions o;
  ASSERT_TRUE(Parse({"--job", "j.yaml", "--insecure-no-token", "--master",
                     "job-master-0:7070,job-master-1:7070,[::1]:7072"},
                    &o)
                  .ok());
  EXPECT_EQ(o.masters,
            (std::vector<std::string>{"job-master-0:7070", "job-master-1:7070", "[::1]:7072"}));
  std::string many;
  for (uint32_t i = 0; i < kMaxMasterShards; ++i) {
    many += (i == 0 ? "m" : ",m") + std::to_string(i) + ":7070";
  }
  ASSERT_TRUE(Parse({"--job", "j.yaml", "--insecure-no-token", "--master", many}, &o).ok());
  EXPECT_EQ(o.masters.size(), kMaxMasterShards);
  const Status too_many =
      Parse({"--job", "j.yaml", "--insecure-no-token", "--master", many + ",m64:7070"}, &o);
  EXPECT_EQ(too_many.message(), "--master: at most 64 addresses (one per master shard)");
}

TEST(CoordinatorOptionsTest, BadFlagsNameTheFlag) {
  unsetenv("GAPTRAIN_TOKEN");
  CoordinatorOptions o;
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--insecure-no-token"}, "--job: is required"},
      {{"--job", "j", "--insecure-no-token", "--bogus"}, "unknown flag '--bogus'"},
      {{"--job", "j", "--insecure-no-token", "--listen", "7071"},
       "--listen: must be HOST:PORT, got '7071'"},
      {{"--job", "j", "--insecure-no-token", "--master", "master"},
       "--master: must be HOST:PORT, got 'master'"},
      {{"--job", "j", "--insecure-no-token", "--master", "m0:7070,m1"},
       "--master: must be HOST:PORT, got 'm1'"},
      {{"--job", "j", "--insecure-no-token", "--master", "m0:7070,,m2:7070"},
       "--master: master shard 1's address is empty in 'm0:7070,,m2:7070'"},
      {{"--job", "j", "--insecure-no-token", "--master", "m0:7070,"},
       "--master: master shard 1's address is empty in 'm0:7070,'"},
      {{"--job", "j", "--insecure-no-token", "--master", ",m0:7070"},
       "--master: master shard 0's address is empty in ',m0:7070'"},
      {{"--job", "j", "--insecure-no-token", "--master", "m0:7070,m1:7070,m0:7070"},
       "--master: master shard 2's address 'm0:7070' is master shard 0's too"},
      {{"--job", "j", "--insecure-no-token", "--master-ca", "ca.pem"},
       "--master-ca: needs --master"},
      {{"--job", "j", "--insecure-no-token", "--task-batches", "0"},
       "--task-batches: must be an integer in [1, 1048576], got '0'"},
      {{"--job", "j", "--insecure-no-token", "--train-samples", "-5"},
       "--train-samples: must be an integer in [1, 4294967295], got '-5'"},
      {{"--job", "j", "--insecure-no-token", "--http-port", "70000"},
       "--http-port: must be an integer in [0, 65535], got '70000'"},
      {{"--job", "j", "--insecure-no-token", "--tls-cert", "c.pem"},
       "--tls-cert and --tls-key: give both or neither"},
      {{"--job", "j", "--insecure-no-token", "--state-dir", ""},
       "--state-dir: must not be empty"},
      {{"--job", "j", "--insecure-no-token", "--state-dir"}, "--state-dir: needs a value"},
      {{"--job", "j"},
       "--token-file: the job token is required (or $GAPTRAIN_TOKEN, or --insecure-no-token)"},
  };
  for (const Case& c : cases) {
    Status s = Parse(c.args, &o);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << c.message;
    EXPECT_EQ(s.message(), c.message);
  }
}

}  // namespace
}  // namespace gaptrain
