#include "services/net/server_flags.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <vector>

namespace gaptrain {
namespace {

// Parses `args` with the shared flags alone into *server, whose values are the defaults.
Status Parse(const std::vector<std::string>& args, ServerFlags* server) {
  FlagSet flags;
  std::string token_file;
  AddServerFlags(&flags, server, &token_file);
  GAPTRAIN_RETURN_IF_ERROR(flags.Parse(args));
  return FinishServerFlags(token_file, server);
}

TEST(ServerFlagsTest, DefaultsStandAndEveryFlagIsRead) {
  unsetenv("GAPTRAIN_TOKEN");
  ServerFlags s = ServerFlags::Defaults("0.0.0.0:7070", 9090);
  ASSERT_TRUE(Parse({"--job", "j.yaml", "--insecure-no-token"}, &s).ok());
  EXPECT_EQ(s.job_file, "j.yaml");
  EXPECT_EQ(s.listen, "0.0.0.0:7070");
  EXPECT_EQ(s.http_address, "0.0.0.0");
  EXPECT_EQ(s.http_port, 9090);
  EXPECT_TRUE(s.allow_no_token);
  EXPECT_TRUE(s.token.empty());

  const std::string token_file = std::string(std::getenv("TEST_TMPDIR")) + "/token";
  std::ofstream(token_file) << "s3cret\n";
  ServerFlags t;
  ASSERT_TRUE(Parse({"--job", "j.yaml", "--listen", "127.0.0.1:0", "--http-address", "::1",
                     "--http-port", "0", "--token-file", token_file, "--tls-cert", "c.pem",
                     "--tls-key", "k.pem", "--ports-file", "/tmp/p"},
                    &t)
                  .ok());
  EXPECT_EQ(t.listen, "127.0.0.1:0");
  EXPECT_EQ(t.http_address, "::1");
  EXPECT_EQ(t.http_port, 0);
  EXPECT_EQ(t.token, "s3cret");
  EXPECT_FALSE(t.allow_no_token);
  EXPECT_EQ(t.tls_cert, "c.pem");
  EXPECT_EQ(t.tls_key, "k.pem");
  EXPECT_EQ(t.ports_file, "/tmp/p");

  setenv("GAPTRAIN_TOKEN", "from-env", 1);
  ServerFlags u = ServerFlags::Defaults("0.0.0.0:7070", 9090);
  ASSERT_TRUE(Parse({"--job", "j.yaml"}, &u).ok());
  EXPECT_EQ(u.token, "from-env");
  unsetenv("GAPTRAIN_TOKEN");
}

TEST(ServerFlagsTest, BadFlagsNameTheFlag) {
  unsetenv("GAPTRAIN_TOKEN");
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--insecure-no-token"}, "--job: is required"},
      {{"--job", "j", "--insecure-no-token", "--listen", "7070"},
       "--listen: must be HOST:PORT, got '7070'"},
      {{"--job", "j", "--insecure-no-token", "--http-port", "70000"},
       "--http-port: must be an integer in [0, 65535], got '70000'"},
      {{"--job", "j", "--insecure-no-token", "--tls-key", "k.pem"},
       "--tls-cert and --tls-key: give both or neither"},
      {{"--job", "j", "--token-file", "/nonexistent/token"}, "/nonexistent/token"},
      {{"--job", "j"},
       "--token-file: the job token is required (or $GAPTRAIN_TOKEN, or --insecure-no-token)"},
  };
  for (const Case& c : cases) {
    ServerFlags s = ServerFlags::Defaults("0.0.0.0:7070", 9090);
    Status status = Parse(c.args, &s);
    EXPECT_FALSE(status.ok()) << c.message;
    EXPECT_NE(status.message().find(c.message), std::string::npos)
        << "got: " << status.message();
  }
}

TEST(ServerFlagsTest, UsageShowsTheBinarysDefaults) {
  const std::string usage =
      ServerFlagsUsage(ServerFlags::Defaults("0.0.0.0:7071", 9091), "/metrics and /status");
  EXPECT_NE(usage.find("--listen HOST:PORT       gRPC address [0.0.0.0:7071]"), std::string::npos)
      << usage;
  EXPECT_NE(usage.find("/metrics and /status address [0.0.0.0]"), std::string::npos) << usage;
  EXPECT_NE(usage.find("[9091]; 0 picks a free port"), std::string::npos) << usage;
  EXPECT_NE(usage.find("--ports-file PATH"), std::string::npos) << usage;
}

}  // namespace
}  // namespace gaptrain
