#include "operator/testing/cluster_hosts.h"

#include "operator/testing/json_fields.h"

namespace gaptrain {
namespace kube_testing {

using nlohmann::json;

namespace {

constexpr char kClusterDomain[] = "cluster.local";

bool SelectorMatches(const json& selector, const json& pod) {
  for (const auto& [key, value] : selector.items()) {
    if (!value.is_string() || StringField(pod, {"metadata", "labels", key}) != value) return false;
  }
  return true;
}

bool IsReady(const json& pod) {
  for (const json& condition : ListField(pod, {"status", "conditions"})) {
    if (StringField(condition, {"type"}) == "Ready") {
      return StringField(condition, {"status"}) == "True";
    }
  }
  return false;
}

// Whether an endpoints controller would list the pod's address.
bool IsEndpoint(const json& pod, bool publish_not_ready) {
  const std::string phase = StringField(pod, {"status", "phase"});
  if (phase == "Succeeded" || phase == "Failed") return false;
  if (FindField(pod, {"metadata", "deletionTimestamp"}) != nullptr) return false;
  if (StringField(pod, {"status", "podIP"}).empty()) return false;
  return publish_not_ready || IsReady(pod);
}

}  // namespace

std::map<std::string, std::vector<std::string>> ServiceRecords(const ClusterSnapshot& snapshot) {
  std::map<std::string, std::vector<std::string>> records;
  for (const json* service : snapshot.All("services")) {
    const json* selector = FindField(*service, {"spec", "selector"});
    if (selector == nullptr || !selector->is_object() || selector->empty()) continue;
    const std::string ns = StringField(*service, {"metadata", "namespace"});
    std::vector<std::string>& addresses =
        records[StringField(*service, {"metadata", "name"}) + "." + ns + ".svc." + kClusterDomain];
    const bool publish_not_ready = BoolField(*service, {"spec", "publishNotReadyAddresses"});
    for (const json* candidate : snapshot.All("pods")) {
      if (StringField(*candidate, {"metadata", "namespace"}) != ns) continue;
      if (!SelectorMatches(*selector, *candidate)) continue;
      if (!IsEndpoint(*candidate, publish_not_ready)) continue;
      addresses.push_back(StringField(*candidate, {"status", "podIP"}));
    }
  }
  return records;
}

std::string PodHostsFile(const json& pod, const std::string& pod_ip,
                         const std::map<std::string, std::vector<std::string>>& service_records) {
  const std::string ns = StringField(pod, {"metadata", "namespace"});
  std::string hostname = StringField(pod, {"spec", "hostname"});
  if (hostname.empty()) hostname = StringField(pod, {"metadata", "name"});
  const std::string subdomain = StringField(pod, {"spec", "subdomain"});

  std::string out =
      "# Kubernetes-managed hosts file (gaptrain LocalNode: cluster DNS for Services).\n"
      "127.0.0.1\tlocalhost\n"
      "::1\tlocalhost ip6-localhost ip6-loopback\n"
      "fe00::0\tip6-localnet\n"
      "fe00::0\tip6-mcastprefix\n"
      "fe00::1\tip6-allnodes\n"
      "fe00::2\tip6-allrouters\n";
  if (!pod_ip.empty()) {
    out += pod_ip + "\t" + hostname;
    if (!subdomain.empty()) {
      out += " " + hostname + "." + subdomain + "." + ns + ".svc." + kClusterDomain;
    }
    out += "\n";
  }
  out += "\n# Services\n";
  const std::string suffix = std::string(".svc.") + kClusterDomain;
  for (const auto& [fqdn, addresses] : service_records) {
    const std::string name_ns = fqdn.substr(0, fqdn.size() - suffix.size());  // "svc.ns"
    std::string names = name_ns + " " + name_ns + ".svc " + fqdn;
    const size_t dot = name_ns.find('.');
    if (name_ns.substr(dot + 1) == ns) names = name_ns.substr(0, dot) + " " + names;
    for (const std::string& address : addresses) out += address + "\t" + names + "\n";
  }
  return out;
}

}  // namespace kube_testing
}  // namespace gaptrain
