// The command lines both executors start a job's processes with: a
// cluster's (token file, TLS, fixed ports) and `gaptrain run`'s (loopback,
// any port, the token in the environment), and a user's command reading
// the same worker settings from the environment.

#include "services/jobplan/service_commands.h"

#include <gtest/gtest.h>

namespace gaptrain {
namespace {

using Args = std::vector<std::string>;

JobFiles ClusterFiles() {
  JobFiles f;
  f.job_file = "/etc/gaptrain/job.yaml";
  f.token_file = "/var/run/gaptrain/token";
  f.tls_cert = "/tls/tls.crt";
  f.tls_key = "/tls/tls.key";
  f.tls_ca = "/tls/ca.crt";
  return f;
}

JobFiles LocalFiles() {
  JobFiles f;
  f.job_file = "/run/job.yaml";
  f.http_address = "127.0.0.1";
  return f;
}

TEST(ServiceCommandsTest, TheMasterOnAClusterAndLocally) {
  MasterPlacement m{"0.0.0.0:7070", 9090, "/ckpt"};
  EXPECT_EQ(MasterArgs(ClusterFiles(), m),
            (Args{"--job", "/etc/gaptrain/job.yaml", "--listen", "0.0.0.0:7070", "--http-port",
                  "9090", "--token-file", "/var/run/gaptrain/token", "--checkpoint-dir", "/ckpt",
                  "--tls-cert", "/tls/tls.crt", "--tls-key", "/tls/tls.key"}));
  m = {"127.0.0.1:0", 0, "/run/checkpoints"};
  EXPECT_EQ(MasterArgs(LocalFiles(), m),
            (Args{"--job", "/run/job.yaml", "--listen", "127.0.0.1:0", "--http-address",
                  "127.0.0.1", "--http-port", "0", "--checkpoint-dir", "/run/checkpoints"}));
  // One of several shards of θ says which; one master alone never does.
  m = {"127.0.0.1:0", 0, "/run/checkpoints", /*shard=*/1, /*shards=*/2};
  EXPECT_EQ(MasterArgs(LocalFiles(), m),
            (Args{"--job", "/run/job.yaml", "--listen", "127.0.0.1:0", "--http-address",
                  "127.0.0.1", "--http-port", "0", "--checkpoint-dir", "/run/checkpoints",
                  "--shard", "1"}));
}

TEST(ServiceCommandsTest, TheCoordinatorOnAClusterAndLocally) {
  CoordinatorPlacement c{"0.0.0.0:7071", 9091, "/state", "job-master.ns.svc:7070",
                         "/status-token"};
  EXPECT_EQ(CoordinatorArgs(ClusterFiles(), c),
            (Args{"--job", "/etc/gaptrain/job.yaml", "--listen", "0.0.0.0:7071", "--http-port",
                  "9091", "--token-file", "/var/run/gaptrain/token", "--state-dir", "/state",
                  "--master", "job-master.ns.svc:7070", "--tls-cert", "/tls/tls.crt",
                  "--tls-key", "/tls/tls.key", "--master-ca", "/tls/ca.crt",
                  "--status-token-file", "/status-token"}));
  c = {"127.0.0.1:0", 0, "/run/coordinator", "127.0.0.1:4000", ""};
  EXPECT_EQ(CoordinatorArgs(LocalFiles(), c),
            (Args{"--job", "/run/job.yaml", "--listen", "127.0.0.1:0", "--http-address",
                  "127.0.0.1", "--http-port", "0", "--state-dir", "/run/coordinator", "--master",
                  "127.0.0.1:4000"}));
}

TEST(ServiceCommandsTest, AWorkersFlagsAndTheVariablesAUsersCommandReads) {
  WorkerPlacement w;
  w.role = "evaluator";
  w.coordinator = "job-coordinator.ns.svc:7071";
  w.http_port = 9092;
  w.host_name = "$(POD_NAME)";
  w.grace_seconds = 25;
  EXPECT_EQ(WorkerArgs(ClusterFiles(), w),
            (Args{"--job", "/etc/gaptrain/job.yaml", "--role", "evaluator", "--coordinator",
                  "job-coordinator.ns.svc:7071", "--token-file", "/var/run/gaptrain/token",
                  "--http-port", "9092", "--host-name", "$(POD_NAME)", "--grace-seconds", "25",
                  "--coordinator-ca", "/tls/ca.crt", "--master-ca", "/tls/ca.crt"}));
  using Env = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(WorkerEnvironment(ClusterFiles(), w),
            (Env{{"GAPTRAIN_JOB", "/etc/gaptrain/job.yaml"},
                 {"GAPTRAIN_ROLE", "evaluator"},
                 {"GAPTRAIN_COORDINATOR", "job-coordinator.ns.svc:7071"},
                 {"GAPTRAIN_HTTP_PORT", "9092"},
                 {"GAPTRAIN_HOST_NAME", "$(POD_NAME)"},
                 {"GAPTRAIN_GRACE_SECONDS", "25"},
                 {"GAPTRAIN_COORDINATOR_CA", "/tls/ca.crt"},
                 {"GAPTRAIN_MASTER_CA", "/tls/ca.crt"}}));

  w = WorkerPlacement();
  w.coordinator = "127.0.0.1:4001";
  w.host_name = "trainer-0";
  w.grace_seconds = 2.5;
  w.threads = 1;
  w.data_cache = "/cache";
  EXPECT_EQ(WorkerArgs(LocalFiles(), w),
            (Args{"--job", "/run/job.yaml", "--role", "trainer", "--coordinator",
                  "127.0.0.1:4001", "--http-address", "127.0.0.1", "--http-port", "0",
                  "--host-name", "trainer-0", "--grace-seconds", "2.5", "--threads", "1",
                  "--data-cache", "/cache"}));
  // gaptrain-worker's own settings (threads, cache, address) are flags only.
  EXPECT_EQ(WorkerEnvironment(LocalFiles(), w),
            (Env{{"GAPTRAIN_JOB", "/run/job.yaml"},
                 {"GAPTRAIN_ROLE", "trainer"},
                 {"GAPTRAIN_COORDINATOR", "127.0.0.1:4001"},
                 {"GAPTRAIN_HTTP_PORT", "0"},
                 {"GAPTRAIN_HOST_NAME", "trainer-0"},
                 {"GAPTRAIN_GRACE_SECONDS", "2.5"}}));
}

}  // namespace
}  // namespace gaptrain
