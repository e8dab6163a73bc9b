#include "operator/operator_options.h"

#include <algorithm>
#include <cmath>

#include "operator/trainingjob/spot_scheduling.h"
#include "services/base/flag_values.h"

namespace gaptrain {
namespace {

bool IsAlphanumeric(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// RFC 1123 labels (namespaces) and subdomains (Lease names), as the API
// server checks them, so a typo fails at start rather than at every call.
Status CheckDnsName(const std::string& flag, const std::string& value, bool subdomain) {
  const size_t max = subdomain ? 253 : 63;
  bool ok = !value.empty() && value.size() <= max && IsAlphanumeric(value.front()) &&
            IsAlphanumeric(value.back());
  for (size_t i = 0; ok && i < value.size(); ++i) {
    const char c = value[i];
    ok = IsAlphanumeric(c) || c == '-' || (subdomain && c == '.' && value[i - 1] != '.');
  }
  if (ok) return Status::OK();
  return Status::InvalidArgument(
      flag + ": must be " + (subdomain ? "a DNS subdomain" : "a DNS label") + " (lower-case " +
      "letters, digits and '-'" + (subdomain ? " or '.'" : "") + ", starting and ending with " +
      "a letter or digit, at most " + std::to_string(max) + " characters), got '" + value + "'");
}

// --image-pull-secrets: Secret names (DNS subdomains), comma-separated, each
// once; "" names none.
Status ParseImagePullSecrets(const std::string& text, std::vector<std::string>* names) {
  names->clear();
  if (text.empty()) return Status::OK();
  size_t begin = 0;
  while (true) {
    const size_t end = std::min(text.find(',', begin), text.size());
    const std::string name = text.substr(begin, end - begin);
    GAPTRAIN_RETURN_IF_ERROR(CheckDnsName("--image-pull-secrets", name, true));
    if (std::find(names->begin(), names->end(), name) == names->end()) names->push_back(name);
    if (end == text.size()) return Status::OK();
    begin = end + 1;
  }
}

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000)));
}

// "--flag=value" -> "--flag", "value".
std::vector<std::string> SplitAssignments(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (const std::string& arg : args) {
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      out.push_back(arg.substr(0, eq));
      out.push_back(arg.substr(eq + 1));
    } else {
      out.push_back(arg);
    }
  }
  return out;
}

std::string EnvOr(const std::map<std::string, std::string>& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() ? "" : it->second;
}

}  // namespace

std::string OperatorUsage() {
  return "usage: gaptrain-operator [flags]\n"
         "Reconciles TrainingJobs (gaptrain.io/v1alpha1): creates each job's pods,\n"
         "services, volumes and token, replaces preempted workers, and keeps the\n"
         "job's status. Flags take a value as '--flag value' or '--flag=value'.\n"
         "Cluster:\n"
         "  --kubeconfig PATH        kubeconfig file; else $KUBECONFIG, ~/.kube/config,\n"
         "                           then the pod's service account (in-cluster)\n"
         "  --context NAME           kubeconfig context [current-context]\n"
         "  --namespace NS           watch only this namespace [every namespace]\n"
         "Jobs:\n"
         "  --image IMAGE            image of new jobs' pods whose template names\n"
         "                           none [in a cluster: the image of this pod's\n"
         "                           container \"operator\" ($POD_NAMESPACE/$POD_NAME,\n"
         "                           read at start); else\n"
         "                           ghcr.io/gaptrain/gaptrain:0.1.0]; a job keeps the\n"
         "                           image its first pods got (status.image), which\n"
         "                           its annotation gaptrain.io/image changes\n"
         "  --image-pull-secrets NAME[,NAME...]   Secrets every job pod pulls its\n"
         "                           images with, after those its template names;\n"
         "                           each must exist in the job's namespace [none]\n"
         "  --spot-preset P          spot nodes of preemptible workers: gke, eks, aks,\n"
         "                           none, or JSON {\"tolerations\": [...],\n"
         "                           \"spotNodeSelector\": [...]} [none]\n"
         "  --pod-ids auto|image|cluster   who sets job pods' user and group ids:\n"
         "                           image: runAsUser, runAsGroup and fsGroup 65532,\n"
         "                           the image's user; cluster: none, the cluster\n"
         "                           assigns them (OpenShift's SCCs, which refuse\n"
         "                           ids outside the namespace's range); auto:\n"
         "                           cluster where the API serves\n"
         "                           security.openshift.io, else image [auto]\n"
         "  --network-policy true|false   give each job a NetworkPolicy admitting only\n"
         "                           its own traffic into its pods: its pods to the\n"
         "                           master's and coordinator's gRPC ports, this\n"
         "                           operator's pods (namespace $POD_NAMESPACE, label\n"
         "                           app.kubernetes.io/part-of=gaptrain) to their HTTP\n"
         "                           ports [true]\n"
         "  --network-policy-prometheus-namespace NS   also admit every pod of NS\n"
         "                           (where Prometheus runs) to each job pod's\n"
         "                           /metrics port [none]\n"         "  --job-tls true|false      new jobs' gRPC (trainers, master, coordinator)\n"
         "                           is TLS, with a certificate the operator issues\n"
         "                           per job (Secret NAME-tls) [true]\n"
         "  --kueue true|false        admit jobs labelled kueue.x-k8s.io/queue-name\n"
         "                           through Kueue: a Workload per job, no pods until\n"
         "                           Kueue admits it (needs Kueue v0.17 or later,\n"
         "                           configured with externalFrameworks\n"
         "                           TrainingJob.v1alpha1.gaptrain.io) [false]\n"
         "  --progress-poll-seconds N   how often a running job's progress is read\n"
         "                           [15]\n"
         "  --workers N              jobs reconciled at once [2]\n"
         "Leader election (one replica reconciles; the others wait with warm caches):\n"
         "  --leader-elect true|false   [true]\n"
         "  --leader-election-namespace NS   namespace of the Lease [the operator's\n"
         "                           own: $POD_NAMESPACE, else the kubeconfig's]\n"
         "  --lease-name NAME        [gaptrain-operator]\n"
         "  --lease-duration-seconds N  a standby takes over this long after the\n"
         "                           leader stops renewing [15]\n"
         "  --renew-deadline-seconds S  the leader gives up after failing to renew\n"
         "                           for this long [10]\n"
         "  --retry-period-seconds S    between attempts to acquire or renew [2]\n"
         "Endpoints:\n"
         "  --metrics-address ADDR   address of both HTTP ports [0.0.0.0]\n"
         "  --metrics-port PORT      /metrics [8080]; 0: ephemeral\n"
         "  --health-port PORT       /healthz and /readyz [8081]; 0: ephemeral; the\n"
         "                           metrics port's number serves all three\n"
         "  --ports-file PATH        write \"METRICS HEALTH\" there once listening\n"
         "  --pod-name NAME          this replica's name in the Lease and in Events'\n"
         "                           reportingInstance [$POD_NAME, else $HOSTNAME]\n"
         "  --help                   this text\n"
         "Exit status: 0 after SIGTERM or SIGINT (the reconciles in flight finish, the\n"
         "Lease is released); 1 when leadership is lost or the operator cannot start;\n"
         "2 for bad flags.\n";
}

Status ParseOperatorFlags(const std::vector<std::string>& args,
                          const std::map<std::string, std::string>& env,
                          OperatorOptions* options) {
  OperatorOptions o;
  std::string leader_elect = "true";
  std::string network_policy = "true";
  std::string kueue = "false";
  std::string job_tls = "true";
  std::string spot_preset = "none";
  uint64_t poll_seconds = 15;
  uint64_t lease_seconds = 15;
  double renew_seconds = 10;
  double retry_seconds = 2;

  // Not an image reference (a NUL byte): --image was not given.
  const std::string image_unset(1, '\0');
  std::string image = image_unset;
  std::string pull_secrets;

  FlagSet flags;
  flags.String("--kubeconfig", &o.kubeconfig);
  flags.String("--context", &o.context);
  flags.String("--namespace", &o.watch_namespace);
  flags.String("--image", &image);
  flags.String("--image-pull-secrets", &pull_secrets);
  flags.String("--spot-preset", &spot_preset);
  flags.OneOf("--pod-ids", {"auto", "image", "cluster"}, &o.pod_ids);
  flags.OneOf("--network-policy", {"true", "false"}, &network_policy);
  flags.String("--network-policy-prometheus-namespace",
               &o.job.network_policy.prometheus_namespace);
  flags.OneOf("--kueue", {"true", "false"}, &kueue);
  flags.OneOf("--job-tls", {"true", "false"}, &job_tls);
  flags.Unsigned("--progress-poll-seconds", 1, 3600, &poll_seconds);
  flags.Unsigned("--workers", 1, 64, &o.workers);
  flags.OneOf("--leader-elect", {"true", "false"}, &leader_elect);
  flags.String("--leader-election-namespace", &o.leader_election_namespace);
  flags.String("--lease-name", &o.lease_name);
  flags.Unsigned("--lease-duration-seconds", 1, 3600, &lease_seconds);
  flags.Seconds("--renew-deadline-seconds", 3600, &renew_seconds);
  flags.Seconds("--retry-period-seconds", 3600, &retry_seconds);
  flags.String("--metrics-address", &o.metrics_address);
  flags.Unsigned("--metrics-port", 0, 65535, &o.metrics_port);
  flags.Unsigned("--health-port", 0, 65535, &o.health_port);
  flags.String("--ports-file", &o.ports_file);
  flags.String("--pod-name", &o.pod_name);
  GAPTRAIN_RETURN_IF_ERROR(flags.Parse(SplitAssignments(args)));

  if (!o.watch_namespace.empty()) {
    GAPTRAIN_RETURN_IF_ERROR(CheckDnsName("--namespace", o.watch_namespace, false));
  }
  if (!o.leader_election_namespace.empty()) {
    GAPTRAIN_RETURN_IF_ERROR(
        CheckDnsName("--leader-election-namespace", o.leader_election_namespace, false));
  }
  if (!o.job.network_policy.prometheus_namespace.empty()) {
    GAPTRAIN_RETURN_IF_ERROR(CheckDnsName("--network-policy-prometheus-namespace",
                                          o.job.network_policy.prometheus_namespace, false));
  }
  GAPTRAIN_RETURN_IF_ERROR(CheckDnsName("--lease-name", o.lease_name, true));
  o.image_given = image != image_unset;
  if (o.image_given) {
    if (image.empty() || image.find_first_of(std::string(" \t\n\0", 4)) != std::string::npos) {
      return Status::InvalidArgument("--image: must be an image reference without spaces, got '" +
                                     image + "'");
    }
    o.job.image = image;
  }
  GAPTRAIN_RETURN_IF_ERROR(ParseImagePullSecrets(pull_secrets, &o.job.image_pull_secrets));
  GAPTRAIN_RETURN_IF_ERROR(ParseSpotScheduling(spot_preset, "--spot-preset", &o.job.spot));
  o.job.progress_poll_interval = std::chrono::seconds(poll_seconds);
  o.leader_elect = leader_elect == "true";
  o.job.network_policy.enabled = network_policy == "true";
  o.job.kueue = kueue == "true";
  o.job.job_tls = job_tls == "true";

  // LeaderElector's rules, named by the flags.
  o.lease_duration = std::chrono::seconds(lease_seconds);
  o.renew_deadline = Millis(renew_seconds);
  o.retry_period = Millis(retry_seconds);
  if (o.retry_period.count() < 10) {
    return Status::InvalidArgument("--retry-period-seconds: must be at least 0.01, got " +
                                   std::to_string(retry_seconds));
  }
  if (o.renew_deadline >= o.lease_duration) {
    return Status::InvalidArgument(
        "--renew-deadline-seconds: must be less than --lease-duration-seconds (" +
        std::to_string(lease_seconds) + ")");
  }
  if (o.renew_deadline.count() <= 1.2 * o.retry_period.count()) {
    return Status::InvalidArgument(
        "--renew-deadline-seconds: must be more than 1.2 x --retry-period-seconds");
  }

  if (o.metrics_address.empty()) {
    return Status::InvalidArgument("--metrics-address: must not be empty");
  }
  o.own_pod_name = EnvOr(env, "POD_NAME");
  o.own_pod_namespace = EnvOr(env, "POD_NAMESPACE");
  // Job NetworkPolicies admit the operator's pods from its own namespace
  // (out of a cluster, without one, the default install's).
  if (!o.own_pod_namespace.empty()) {
    o.job.network_policy.operator_namespace = o.own_pod_namespace;
  }
  if (o.pod_name.empty()) o.pod_name = EnvOr(env, "POD_NAME");
  if (o.pod_name.empty()) o.pod_name = EnvOr(env, "HOSTNAME");
  if (o.pod_name.empty()) o.pod_name = "gaptrain-operator";
  // Events' reportingInstance allows 128 characters.
  if (o.pod_name.size() > 128 || o.pod_name.find_first_of(" \t\n/") != std::string::npos) {
    return Status::InvalidArgument(
        "--pod-name: must be a pod name (at most 128 characters, no spaces or '/'), got '" +
        o.pod_name + "'");
  }
  o.job.reporting_instance = o.pod_name;
  *options = o;
  return Status::OK();
}

}  // namespace gaptrain
