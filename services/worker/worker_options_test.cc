#include "services/worker/worker_options.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

namespace gaptrain {
namespace {

Status Parse(std::vector<std::string> args, WorkerOptions* o) { return ParseWorkerFlags(args, o); }

TEST(WorkerOptionsTest, DefaultsAndEveryFlag) {
  unsetenv("GAPTRAIN_TOKEN");
  setenv("HOSTNAME", "pod-7", 1);
  WorkerOptions o;
  ASSERT_TRUE(
      Parse({"--job", "j.yaml", "--coordinator", "coord:7071", "--insecure-no-token"}, &o).ok());
  EXPECT_EQ(o.coordinator, "coord:7071");
  EXPECT_FALSE(o.evaluator);
  EXPECT_EQ(o.threads, 0);
  EXPECT_EQ(o.device, "cpu");
  EXPECT_EQ(o.grace_seconds, 20);
  EXPECT_EQ(o.http_port, 9092);
  EXPECT_EQ(o.host_name, "pod-7");
  EXPECT_TRUE(o.token.empty());

  const std::string token_file = std::string(std::getenv("TEST_TMPDIR")) + "/token";
  std::ofstream(token_file) << "s3cret\n";
  ASSERT_TRUE(Parse({"--job",
                     "j.yaml",
                     "--coordinator",
                     "[::1]:7071",
                     "--token-file",
                     token_file,
                     "--role",
                     "evaluator",
                     "--threads",
                     "3",
                     "--device",
                     "cuda",
                     "--grace-seconds",
                     "2.5",
                     "--http-address",
                     "127.0.0.1",
                     "--http-port",
                     "0",
                     "--host-name",
                     "w-1",
                     "--data-dir",
                     "/data/mnist",
                     "--data-cache",
                     "/cache",
                     "--ports-file",
                     "/tmp/p",
                     "--coordinator-ca",
                     "c.pem",
                     "--master-ca",
                     "m.pem"},
                    &o)
                  .ok());
  EXPECT_EQ(o.token, "s3cret");
  EXPECT_TRUE(o.evaluator);
  EXPECT_EQ(o.threads, 3);
  EXPECT_EQ(o.device, "cuda");
  EXPECT_DOUBLE_EQ(o.grace_seconds, 2.5);
  EXPECT_EQ(o.http_port, 0);
  EXPECT_EQ(o.host_name, "w-1");
  EXPECT_EQ(o.data_dir, "/data/mnist");
  EXPECT_EQ(o.data_cache, "/cache");
  EXPECT_EQ(o.ports_file, "/tmp/p");
  EXPECT_EQ(o.coordinator_ca, "c.pem");
  EXPECT_EQ(o.master_ca, "m.pem");

  setenv("GAPTRAIN_TOKEN", "from-env", 1);
  ASSERT_TRUE(Parse({"--job", "j.yaml", "--coordinator", "c:1"}, &o).ok());
  EXPECT_EQ(o.token, "from-env");
  unsetenv("GAPTRAIN_TOKEN");
}

TEST(WorkerOptionsTest, BadFlagsNameTheFlag) {
  unsetenv("GAPTRAIN_TOKEN");
  setenv("HOSTNAME", "pod-7", 1);
  WorkerOptions o;
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<std::string> ok = {"--job", "j", "--coordinator", "c:1", "--insecure-no-token"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = ok;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  const std::vector<Case> cases = {
      {{"--coordinator", "c:1", "--insecure-no-token"}, "--job: is required"},
      {{"--job", "j", "--insecure-no-token"}, "--coordinator: is required"},
      {{"--job", "j", "--coordinator", "coord", "--insecure-no-token"},
       "--coordinator: must be HOST:PORT, got 'coord'"},
      {with({"--bogus"}), "unknown flag '--bogus'"},
      {with({"--role", "master"}), "--role: must be trainer or evaluator, got 'master'"},
      {with({"--device", "tpu"}), "--device: must be cpu or cuda, got 'tpu'"},
      {with({"--threads", "-1"}), "--threads: must be an integer in [0, 1024], got '-1'"},
      {with({"--grace-seconds", "soon"}),
       "--grace-seconds: must be a number of seconds in [0, 86400], got 'soon'"},
      {with({"--http-port", "70000"}),
       "--http-port: must be an integer in [0, 65535], got '70000'"},
      {with({"--ports-file"}), "--ports-file: needs a value"},
      {{"--job", "j", "--coordinator", "c:1"},
       "--token-file: the job token is required (or $GAPTRAIN_TOKEN, or --insecure-no-token)"},
      {with({"--token-file", "/nonexistent/token"}),
       "--token-file: /nonexistent/token: cannot read: No such file or directory"},
  };
  for (const Case& c : cases) {
    Status s = Parse(c.args, &o);
    EXPECT_EQ(s.code(), c.message.find("cannot read") != std::string::npos
                            ? Status::Code::kNotFound
                            : Status::Code::kInvalidArgument)
        << c.message;
    EXPECT_EQ(s.message(), c.message);
  }

  unsetenv("HOSTNAME");
  Status s = Parse(ok, &o);  // falls back to gethostname(), which a test machine has
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_FALSE(o.host_name.empty());
}

}  // namespace
}  // namespace gaptrain
