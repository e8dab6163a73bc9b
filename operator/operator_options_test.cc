// Tests gaptrain-operator's flags: the defaults a Deployment gets without
// any, every flag read in both spellings, and bad values refused with the
// flag's name and the reason.

#include "operator/operator_options.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace gaptrain {
namespace {

using Env = std::map<std::string, std::string>;

OperatorOptions Parse(const std::vector<std::string>& args, const Env& env = {}) {
  OperatorOptions options;
  const Status s = ParseOperatorFlags(args, env, &options);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return options;
}

std::string Error(const std::vector<std::string>& args) {
  OperatorOptions options;
  const Status s = ParseOperatorFlags(args, {}, &options);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  return s.message();
}

TEST(OperatorOptionsTest, DefaultsAreControllerRuntimes) {
  const OperatorOptions o = Parse({}, {{"HOSTNAME", "gaptrain-operator-7d9f-abcde"}});
  EXPECT_EQ(o.kubeconfig, "");
  EXPECT_EQ(o.watch_namespace, "");  // every namespace
  // The built-in default, which OperatorProcess replaces by its own
  // container's image in a cluster (job_image_test).
  EXPECT_EQ(o.job.image, "ghcr.io/gaptrain/gaptrain:0.1.0");
  EXPECT_FALSE(o.image_given);
  EXPECT_EQ(o.own_pod_name, "");
  EXPECT_EQ(o.own_pod_namespace, "");
  EXPECT_EQ(o.job.spot.name, "none");
  EXPECT_EQ(o.pod_ids, "auto");
  EXPECT_EQ(o.job.progress_poll_interval, std::chrono::seconds(15));
  EXPECT_EQ(o.workers, 2);
  EXPECT_TRUE(o.leader_elect);
  EXPECT_EQ(o.leader_election_namespace, "");
  EXPECT_EQ(o.lease_name, "gaptrain-operator");
  EXPECT_EQ(o.lease_duration, std::chrono::seconds(15));
  EXPECT_EQ(o.renew_deadline, std::chrono::seconds(10));
  EXPECT_EQ(o.retry_period, std::chrono::seconds(2));
  EXPECT_EQ(o.metrics_address, "0.0.0.0");
  EXPECT_EQ(o.metrics_port, 8080);
  EXPECT_EQ(o.health_port, 8081);
  EXPECT_EQ(o.pod_name, "gaptrain-operator-7d9f-abcde");
  EXPECT_EQ(o.job.reporting_instance, o.pod_name);
  // Jobs get a NetworkPolicy admitting the default install's operator
  // (out of a cluster: no $POD_NAMESPACE), and no Prometheus.
  EXPECT_TRUE(o.job.network_policy.enabled);
  EXPECT_EQ(o.job.network_policy.operator_namespace, "gaptrain-system");
  EXPECT_EQ(o.job.network_policy.prometheus_namespace, "");
}

TEST(OperatorOptionsTest, EveryFlagInBothSpellings) {
  const OperatorOptions o =
      Parse({"--kubeconfig", "/k/config", "--context=kind", "--namespace", "team-a",
             "--image=registry.example.com/gaptrain:1.2", "--spot-preset", "gke",
             "--pod-ids=cluster", "--progress-poll-seconds=5", "--workers", "4", "--leader-elect=false",
             "--leader-election-namespace", "gaptrain-system", "--lease-name=op.gaptrain.io",
             "--lease-duration-seconds", "4", "--renew-deadline-seconds=2.5",
             "--retry-period-seconds", "0.5", "--metrics-address", "127.0.0.1",
             "--metrics-port=0", "--health-port", "9000", "--ports-file", "/tmp/p",
             "--pod-name", "op-0", "--network-policy=false",
             "--network-policy-prometheus-namespace", "monitoring",
             "--image-pull-secrets=regcred,mirror.example.com"},
            {{"POD_NAME", "ignored"}});
  EXPECT_EQ(o.kubeconfig, "/k/config");
  EXPECT_EQ(o.context, "kind");
  EXPECT_EQ(o.watch_namespace, "team-a");
  EXPECT_EQ(o.job.image, "registry.example.com/gaptrain:1.2");
  EXPECT_TRUE(o.image_given);
  EXPECT_EQ(o.job.spot.name, "gke");
  EXPECT_EQ(o.pod_ids, "cluster");
  EXPECT_FALSE(o.job.spot.tolerations.empty());
  EXPECT_EQ(o.job.progress_poll_interval, std::chrono::seconds(5));
  EXPECT_EQ(o.workers, 4);
  EXPECT_FALSE(o.leader_elect);
  EXPECT_EQ(o.leader_election_namespace, "gaptrain-system");
  EXPECT_EQ(o.lease_name, "op.gaptrain.io");
  EXPECT_EQ(o.lease_duration, std::chrono::seconds(4));
  EXPECT_EQ(o.renew_deadline, std::chrono::milliseconds(2500));
  EXPECT_EQ(o.retry_period, std::chrono::milliseconds(500));
  EXPECT_EQ(o.metrics_address, "127.0.0.1");
  EXPECT_EQ(o.metrics_port, 0);
  EXPECT_EQ(o.health_port, 9000);
  EXPECT_EQ(o.ports_file, "/tmp/p");
  EXPECT_EQ(o.pod_name, "op-0");
  EXPECT_FALSE(o.job.network_policy.enabled);
  EXPECT_EQ(o.job.network_policy.prometheus_namespace, "monitoring");
  EXPECT_TRUE(Parse({"--network-policy", "true"}).job.network_policy.enabled);
  EXPECT_EQ(o.job.image_pull_secrets,
            (std::vector<std::string>{"regcred", "mirror.example.com"}));
}

// Secret names, comma-separated (as the chart passes them), each once; an
// empty value names none.
TEST(OperatorOptionsTest, ImagePullSecrets) {
  EXPECT_TRUE(Parse({}).job.image_pull_secrets.empty());
  EXPECT_TRUE(Parse({"--image-pull-secrets="}).job.image_pull_secrets.empty());
  EXPECT_EQ(Parse({"--image-pull-secrets", "regcred"}).job.image_pull_secrets,
            std::vector<std::string>{"regcred"});
  EXPECT_EQ(Parse({"--image-pull-secrets", "b,a,b"}).job.image_pull_secrets,
            (std::vector<std::string>{"b", "a"}));
}

TEST(OperatorOptionsTest, PodNameComesFromTheDownwardApiFirst) {
  EXPECT_EQ(Parse({}, {{"POD_NAME", "op-1"}, {"HOSTNAME", "h"}}).pod_name, "op-1");
  EXPECT_EQ(Parse({}).pod_name, "gaptrain-operator");
}

// The pod whose container's image job pods get without --image: the
// downward API's, whatever --pod-name says, and never $HOSTNAME (out of a
// cluster that is the machine's name).
TEST(OperatorOptionsTest, TheOwnPodComesFromTheDownwardApiOnly) {
  OperatorOptions o = Parse({"--pod-name", "op-0"},
                            {{"POD_NAME", "gaptrain-operator-7d9f-abcde"},
                             {"POD_NAMESPACE", "gaptrain-system"},
                             {"HOSTNAME", "h"}});
  EXPECT_EQ(o.own_pod_name, "gaptrain-operator-7d9f-abcde");
  EXPECT_EQ(o.own_pod_namespace, "gaptrain-system");
  EXPECT_EQ(o.pod_name, "op-0");
  EXPECT_FALSE(o.image_given);
  // Job NetworkPolicies admit the operator's pods from its own namespace.
  EXPECT_EQ(Parse({}, {{"POD_NAMESPACE", "ops"}}).job.network_policy.operator_namespace, "ops");
  o = Parse({}, {{"HOSTNAME", "laptop"}});
  EXPECT_EQ(o.own_pod_name, "");
  EXPECT_EQ(o.pod_name, "laptop");
  // The built-in default's own name, given explicitly, still counts as given.
  o = Parse({"--image", "ghcr.io/gaptrain/gaptrain:0.1.0"}, {{"POD_NAME", "p"}});
  EXPECT_TRUE(o.image_given);
  EXPECT_EQ(o.job.image, "ghcr.io/gaptrain/gaptrain:0.1.0");
}

TEST(OperatorOptionsTest, CustomSpotSchedulingAsJson) {
  const OperatorOptions o = Parse(
      {"--spot-preset",
       R"({"tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
           "spotNodeSelector": [{"key": "pool", "operator": "In", "values": ["spot"]}]})"});
  EXPECT_EQ(o.job.spot.name, "custom");
  EXPECT_EQ(o.job.spot.spot_node_selector[0]["key"], "pool");
}

TEST(OperatorOptionsTest, BadValuesNameTheFlag) {
  EXPECT_EQ(Error({"--workers", "0"}), "--workers: must be an integer in [1, 64], got '0'");
  EXPECT_EQ(Error({"--leader-elect", "yes"}), "--leader-elect: must be true or false, got 'yes'");
  EXPECT_EQ(Error({"--metrics-port=70000"}),
            "--metrics-port: must be an integer in [0, 65535], got '70000'");
  EXPECT_EQ(Error({"--bogus"}), "unknown flag '--bogus'");
  EXPECT_EQ(Error({"--kubeconfig"}), "--kubeconfig: needs a value");
  EXPECT_EQ(Error({"--namespace", "Team_A"}).rfind("--namespace: must be a DNS label", 0), 0u);
  EXPECT_EQ(Error({"--lease-name", "a..b"}).rfind("--lease-name: must be a DNS subdomain", 0), 0u);
  EXPECT_EQ(Error({"--image", "a b"}),
            "--image: must be an image reference without spaces, got 'a b'");
  EXPECT_EQ(Error({"--image="}), "--image: must be an image reference without spaces, got ''");
  EXPECT_EQ(Error({"--spot-preset", "gcp"}).rfind("--spot-preset", 0), 0u);
  EXPECT_EQ(Error({"--network-policy", "off"}),
            "--network-policy: must be true or false, got 'off'");
  EXPECT_EQ(Error({"--network-policy-prometheus-namespace", "Monitoring"})
                .rfind("--network-policy-prometheus-namespace: must be a DNS label", 0),
            0u);
  EXPECT_EQ(Error({"--pod-ids", "openshift"}),
            "--pod-ids: must be auto, image or cluster, got 'openshift'");
  EXPECT_EQ(Error({"--progress-poll-seconds", "0"}),
            "--progress-poll-seconds: must be an integer in [1, 3600], got '0'");
  EXPECT_EQ(Error({"--lease-duration-seconds", "5", "--renew-deadline-seconds", "5"}),
            "--renew-deadline-seconds: must be less than --lease-duration-seconds (5)");
  EXPECT_EQ(Error({"--renew-deadline-seconds", "2", "--retry-period-seconds", "2"}),
            "--renew-deadline-seconds: must be more than 1.2 x --retry-period-seconds");
  EXPECT_EQ(Error({"--retry-period-seconds", "x"}),
            "--retry-period-seconds: must be a number of seconds in [0, 3600], got 'x'");
  EXPECT_EQ(Error({"--pod-name", "a/b"}).rfind("--pod-name: must be a pod name", 0), 0u);
  EXPECT_EQ(Error({"--metrics-address", ""}), "--metrics-address: must not be empty");
  EXPECT_EQ(Error({"--image-pull-secrets", "Reg_Cred"}),
            "--image-pull-secrets: must be a DNS subdomain (lower-case letters, digits and '-' "
            "or '.', starting and ending with a letter or digit, at most 253 characters), got "
            "'Reg_Cred'");
  EXPECT_EQ(Error({"--image-pull-secrets", "regcred,,mirror"})
                .rfind("--image-pull-secrets: must be a DNS subdomain", 0),
            0u);
  EXPECT_NE(Error({"--image-pull-secrets", "regcred, mirror"}).find("got ' mirror'"),
            std::string::npos);
}

TEST(OperatorOptionsTest, UsageNamesEveryFlag) {
  const std::string usage = OperatorUsage();
  for (const char* flag :
       {"--kubeconfig", "--context", "--namespace", "--image", "--image-pull-secrets",
        "--spot-preset",
        "--progress-poll-seconds", "--workers", "--leader-elect", "--leader-election-namespace",
        "--lease-name", "--lease-duration-seconds", "--renew-deadline-seconds",
        "--retry-period-seconds", "--metrics-address", "--metrics-port", "--health-port",
        "--ports-file", "--pod-name", "--network-policy",
        "--network-policy-prometheus-namespace", "--help"}) {
    EXPECT_NE(usage.find(flag), std::string::npos) << flag;
  }
}

}  // namespace
}  // namespace gaptrain
