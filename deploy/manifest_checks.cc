#include "deploy/manifest_checks.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>

#include "operator/operator_options.h"
#include "operator/operator_permissions.h"
#include "operator/trainingjob/operator_config.h"
#include "services/base/process.h"
#include "services/testing/test_files.h"
#include "services/testing/yaml_to_json.h"

namespace gaptrain {
namespace {

using nlohmann::json;

const char kOperator[] = "gaptrain-operator";

// obj[a][b]... or null.
json At(const json& obj, std::initializer_list<const char*> path) {
  const json* v = &obj;
  for (const char* key : path) {
    if (!v->is_object() || !v->contains(key)) return nullptr;
    v = &(*v)[key];
  }
  return *v;
}

std::string Str(const json& v) { return v.is_string() ? v.get<std::string>() : ""; }

int IntOr(const json& v, int otherwise) { return v.is_number_integer() ? v.get<int>() : otherwise; }

// A Kubernetes label selector (matchLabels, matchExpressions) against labels.
bool SelectorMatches(const json& selector, const json& labels) {
  if (!selector.is_object()) return false;
  const json match_labels = At(selector, {"matchLabels"});
  for (const auto& [key, value] : match_labels.items()) {
    if (!labels.contains(key) || labels.at(key) != value) return false;
  }
  for (const json& e : At(selector, {"matchExpressions"})) {
    const std::string key = Str(At(e, {"key"})), op = Str(At(e, {"operator"}));
    const bool has = labels.contains(key);
    bool in_values = false;
    for (const json& v : At(e, {"values"})) in_values |= has && labels.at(key) == v;
    if ((op == "Exists" && !has) || (op == "DoesNotExist" && has) || (op == "In" && !in_values) ||
        (op == "NotIn" && in_values)) {
      return false;
    }
    if (op != "Exists" && op != "DoesNotExist" && op != "In" && op != "NotIn") return false;
  }
  return true;
}

// Prometheus' label name for a Kubernetes label: every character outside
// [a-zA-Z0-9_] becomes '_'.
std::string Sanitize(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
  }
  return out;
}

// A pod as Kubernetes service discovery (role: pod) shows it: one target
// per container port.
struct Pod {
  std::string name_space;
  json labels = json::object();
  json ports = json::array();  // [{name, containerPort}]
};

std::vector<std::map<std::string, std::string>> DiscoveredTargets(const Pod& pod) {
  std::vector<std::map<std::string, std::string>> targets;
  for (const json& port : pod.ports) {
    std::map<std::string, std::string> t;
    t["__meta_kubernetes_namespace"] = pod.name_space;
    for (const auto& [key, value] : pod.labels.items()) {
      t["__meta_kubernetes_pod_label_" + Sanitize(key)] = Str(value);
      t["__meta_kubernetes_pod_labelpresent_" + Sanitize(key)] = "true";
    }
    t["__meta_kubernetes_pod_container_port_name"] = Str(At(port, {"name"}));
    t["__meta_kubernetes_pod_container_port_number"] = At(port, {"containerPort"}).dump();
    targets.push_back(t);
  }
  return targets;
}

bool FullMatch(const std::string& regex, const std::string& text) {
  return std::regex_match(text, std::regex("(?:" + regex + ")"));
}

// Whether the scrape job's keep and drop rules let `target` through.
bool Kept(const json& scrape_job, const std::map<std::string, std::string>& target) {
  for (const json& rule : At(scrape_job, {"relabel_configs"})) {
    const std::string action = rule.contains("action") ? Str(At(rule, {"action"})) : "replace";
    if (action != "keep" && action != "drop") continue;
    std::string value;
    const std::string separator = rule.contains("separator") ? Str(At(rule, {"separator"})) : ";";
    bool first = true;
    for (const json& label : At(rule, {"source_labels"})) {
      auto it = target.find(Str(label));
      value += (first ? "" : separator) + (it == target.end() ? "" : it->second);
      first = false;
    }
    const std::string regex = rule.contains("regex") ? Str(At(rule, {"regex"})) : "(.*)";
    if (FullMatch(regex, value) != (action == "keep")) return false;
  }
  return true;
}

// The targets of `pod` that the scrape job keeps, by port name.
std::set<std::string> KeptPorts(const json& scrape_job, const Pod& pod) {
  std::set<std::string> kept;
  for (const auto& target : DiscoveredTargets(pod)) {
    if (Kept(scrape_job, target)) kept.insert(target.at("__meta_kubernetes_pod_container_port_name"));
  }
  return kept;
}

// The labels the scrape job's labelmap rules copy from `pod`.
std::set<std::string> LabelMapped(const json& scrape_job, const Pod& pod) {
  std::set<std::string> mapped;
  for (const auto& target : DiscoveredTargets(pod)) {
    for (const json& rule : At(scrape_job, {"relabel_configs"})) {
      if (Str(At(rule, {"action"})) != "labelmap") continue;
      const std::regex regex("(?:" + Str(At(rule, {"regex"})) + ")");
      const std::string replacement = rule.contains("replacement") ? Str(At(rule, {"replacement"})) : "$1";
      for (const auto& [name, value] : target) {
        std::smatch m;
        if (std::regex_match(name, m, regex)) mapped.insert(m.format(replacement));
      }
    }
  }
  return mapped;
}

json ScrapeJob(const json& scrape_config, const std::string& name) {
  for (const json& job : At(scrape_config, {"scrape_configs"})) {
    if (Str(At(job, {"job_name"})) == name) return job;
  }
  return nullptr;
}

// The users' ClusterRoles, by name: the labels that aggregate each into
// Kubernetes' default roles, and its rules (deploy/rbac/aggregated_roles.yaml).
struct AggregatedRole {
  json labels;
  json rules;
};

const std::map<std::string, AggregatedRole>& AggregatedRoles() {
  static const auto* roles = new std::map<std::string, AggregatedRole>{
      {"gaptrain-edit",
       {json::parse(R"({"app.kubernetes.io/part-of": "gaptrain",
                        "rbac.authorization.k8s.io/aggregate-to-edit": "true",
                        "rbac.authorization.k8s.io/aggregate-to-admin": "true"})"),
        json::parse(R"([
          {"apiGroups": ["gaptrain.io"], "resources": ["trainingjobs"],
           "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update",
                     "watch"]},
          {"apiGroups": ["gaptrain.io"], "resources": ["trainingjobs/scale"],
           "verbs": ["get", "patch", "update"]},
          {"apiGroups": ["gaptrain.io"], "resources": ["trainingjobs/status"],
           "verbs": ["get"]}])")}},
      {"gaptrain-view",
       {json::parse(R"({"app.kubernetes.io/part-of": "gaptrain",
                        "rbac.authorization.k8s.io/aggregate-to-view": "true"})"),
        json::parse(R"([
          {"apiGroups": ["gaptrain.io"], "resources": ["trainingjobs"],
           "verbs": ["get", "list", "watch"]},
          {"apiGroups": ["gaptrain.io"], "resources": ["trainingjobs/scale", "trainingjobs/status"],
           "verbs": ["get"]}])")}},
  };
  return *roles;
}

json OperatorDeployment(const std::vector<json>& objects) {
  return FindObject(objects, "Deployment", kOperator);
}

json OperatorContainer(const json& deployment) {
  const json containers = At(deployment, {"spec", "template", "spec", "containers"});
  return containers.is_array() && !containers.empty() ? containers[0] : json(nullptr);
}

Pod OperatorPod(const json& deployment) {
  Pod pod;
  pod.name_space = Str(At(deployment, {"metadata", "namespace"}));
  const json labels = At(deployment, {"spec", "template", "metadata", "labels"});
  if (labels.is_object()) pod.labels = labels;
  const json ports = At(OperatorContainer(deployment), {"ports"});
  if (ports.is_array()) pod.ports = ports;
  return pod;
}

// What a TrainingJob's pod looks like to Prometheus (the operator's
// labels and port name, docs/operator.md).
Pod JobPod(bool labelled) {
  Pod pod;
  pod.name_space = "team-a";
  if (labelled) pod.labels = {{"gaptrain.io/job-name", "mnist"}, {"gaptrain.io/replica-type", "trainer"}};
  pod.ports = json::array({{{"name", "metrics"}, {"containerPort", 9092}}});
  return pod;
}

// Whether the PodMonitor selects `pod` and which of its ports it scrapes.
std::set<std::string> PodMonitorPorts(const json& monitor, const Pod& pod) {
  std::set<std::string> ports;
  const json ns = At(monitor, {"spec", "namespaceSelector"});
  bool in_namespace = Str(At(monitor, {"metadata", "namespace"})) == pod.name_space;
  if (ns.is_object() && At(ns, {"any"}) == true) in_namespace = true;
  if (ns.is_object() && ns.contains("matchNames")) {
    in_namespace = false;
    for (const json& n : ns["matchNames"]) in_namespace |= Str(n) == pod.name_space;
  }
  if (!in_namespace || !SelectorMatches(At(monitor, {"spec", "selector"}), pod.labels)) return ports;
  for (const json& endpoint : At(monitor, {"spec", "podMetricsEndpoints"})) {
    for (const json& port : pod.ports) {
      if (At(port, {"name"}) == At(endpoint, {"port"})) ports.insert(Str(At(port, {"name"})));
    }
  }
  return ports;
}

std::string Join(const std::set<std::string>& items) {
  std::string out = "{";
  for (const std::string& s : items) out += (out.size() > 1 ? ", " : "") + s;
  return out + "}";
}

}  // namespace

Status ParseManifests(const std::string& text, std::vector<json>* objects) {
  std::istringstream lines(text);
  std::string line, document;
  int number = 0, start = 1;
  auto flush = [&]() -> Status {
    json object;
    Status s = kube_testing::YamlToJson(document, &object);
    if (!s.ok()) {
      return Status::InvalidArgument("the document at line " + std::to_string(start) + ": " +
                                     s.message());
    }
    if (!object.is_null()) objects->push_back(object);
    document.clear();
    return Status::OK();
  };
  while (std::getline(lines, line)) {
    ++number;
    if (line == "---" || line.rfind("--- ", 0) == 0) {
      GAPTRAIN_RETURN_IF_ERROR(flush());
      start = number + 1;
      continue;
    }
    document += line + "\n";
  }
  return flush();
}

Status ReadYamlFile(const std::string& path, json* out) {
  if (!PathExists(path)) return Status::NotFound(path + ": no such file");
  const Status s = kube_testing::YamlToJson(ReadRaw(path), out);
  if (!s.ok()) return Status::InvalidArgument(path + ": " + s.message());
  return Status::OK();
}

std::string ProblemLines(const Problems& problems) {
  std::string out;
  for (const std::string& p : problems) out += p + "\n";
  return out;
}

std::string FindKubectl() {
  const char* env = std::getenv("GAPTRAIN_KUBECTL_BINARY");
  if (env != nullptr && *env != '\0') return env;
  const char* assets = std::getenv("KUBEBUILDER_ASSETS");
  if (assets != nullptr && *assets != '\0') {
    const std::string pinned = std::string(assets) + "/kubectl";
    if (access(pinned.c_str(), X_OK) == 0) return pinned;
  }
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/kubectl";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

Status KustomizeBuild(const std::string& kubectl, const std::string& dir, std::string* out) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  static int runs = 0;
  const std::string base = std::string(tmp != nullptr ? tmp : "/tmp") + "/kustomize-" +
                           std::to_string(getpid()) + "-" + std::to_string(++runs);
  // Bazel's runfiles are links into the source tree, outside the
  // kustomization's root, which kustomize's loader may refuse: build a
  // copy of the manifests with the links resolved.
  const std::string copy = base + "/tree";
  std::error_code error;
  for (auto it = std::filesystem::recursive_directory_iterator(
           dir, std::filesystem::directory_options::follow_directory_symlink, error);
       !error && it != std::filesystem::recursive_directory_iterator(); it.increment(error)) {
    const std::string ext = it->path().extension().string();
    if (!it->is_regular_file() || (ext != ".yaml" && ext != ".yml" && ext != ".json")) continue;
    const auto target = copy / it->path().lexically_relative(dir);
    std::filesystem::create_directories(target.parent_path(), error);
    if (!error) std::filesystem::copy_file(it->path(), target, error);
  }
  if (error) return Status::Internal("copying " + dir + " to " + copy + ": " + error.message());
  Process::Spec spec;
  spec.binary = kubectl;
  spec.args = {"kustomize", copy};
  spec.log_file = base + ".out";
  std::unique_ptr<Process> process;
  GAPTRAIN_RETURN_IF_ERROR(Process::Start(spec, &process));
  if (!process->WaitExit(std::chrono::seconds(60))) {
    return Status::Unavailable("kubectl kustomize " + dir + ": no exit within 60 s");
  }
  *out = ReadRaw(spec.log_file);
  std::remove(spec.log_file.c_str());
  if (!WIFEXITED(process->wait_status()) || WEXITSTATUS(process->wait_status()) != 0) {
    return Status::InvalidArgument("kubectl kustomize " + dir + ": " +
                                   DescribeWaitStatus(process->wait_status()) + ": " + *out);
  }
  return Status::OK();
}

json FindObject(const std::vector<json>& objects, const std::string& kind,
                const std::string& name) {
  for (const json& o : objects) {
    if (Str(At(o, {"kind"})) == kind && Str(At(o, {"metadata", "name"})) == name) return o;
  }
  return nullptr;
}

Problems IdentityProblems(const std::vector<json>& objects) {
  Problems problems;
  if (objects.empty()) problems.push_back("no objects");
  for (size_t i = 0; i < objects.size(); ++i) {
    const json& o = objects[i];
    for (const auto& path : {std::vector<const char*>{"apiVersion"}, {"kind"}, {"metadata", "name"}}) {
      json v = o;
      std::string dotted;
      for (const char* key : path) {
        v = v.is_object() && v.contains(key) ? v[key] : json(nullptr);
        dotted += (dotted.empty() ? "" : ".") + std::string(key);
      }
      if (!v.is_string() || v.get<std::string>().empty()) {
        problems.push_back("object " + std::to_string(i) + " (" + Str(At(o, {"kind"})) + " " +
                           Str(At(o, {"metadata", "name"})) + "): no " + dotted);
      }
    }
  }
  return problems;
}

Problems RbacProblems(const std::vector<json>& objects) {
  Problems problems;
  const json role = FindObject(objects, "ClusterRole", kOperator);
  if (role.is_null()) return {"no ClusterRole gaptrain-operator"};
  if (At(role, {"rules"}) != OperatorPolicyRules()) {
    problems.push_back("ClusterRole gaptrain-operator: rules must equal OperatorPolicyRules() "
                       "(operator/operator_permissions.cc), which are:\n" +
                       OperatorPolicyRules().dump(2) + "\nbut are:\n" + At(role, {"rules"}).dump(2));
  }
  for (const json& o : objects) {
    const std::string kind = Str(At(o, {"kind"})), name = Str(At(o, {"metadata", "name"}));
    // The users' roles are checked by AggregatedRoleProblems.
    if (kind == "ClusterRole" && AggregatedRoles().count(name) > 0) continue;
    if ((kind == "Role" || kind == "ClusterRole") && name != kOperator) {
      problems.push_back(kind + " " + name + ": grants more than OperatorPermissions()");
    }
  }
  const json deployment = OperatorDeployment(objects);
  const std::string account = Str(At(deployment, {"spec", "template", "spec", "serviceAccountName"}));
  const std::string ns = Str(At(deployment, {"metadata", "namespace"}));
  if (account.empty()) problems.push_back("Deployment gaptrain-operator: no serviceAccountName");
  const json sa = FindObject(objects, "ServiceAccount", account);
  if (sa.is_null() || Str(At(sa, {"metadata", "namespace"})) != ns) {
    problems.push_back("no ServiceAccount " + account + " in namespace " + ns);
  }
  const json binding = FindObject(objects, "ClusterRoleBinding", kOperator);
  if (At(binding, {"roleRef"}) != json{{"apiGroup", "rbac.authorization.k8s.io"},
                                       {"kind", "ClusterRole"},
                                       {"name", kOperator}}) {
    problems.push_back("ClusterRoleBinding gaptrain-operator: must refer to ClusterRole "
                       "gaptrain-operator");
  }
  const json subjects = At(binding, {"subjects"});
  if (subjects != json::array({{{"kind", "ServiceAccount"}, {"name", account}, {"namespace", ns}}})) {
    problems.push_back("ClusterRoleBinding gaptrain-operator: its one subject must be "
                       "ServiceAccount " + ns + "/" + account + ", got " + subjects.dump());
  }
  return problems;
}

Problems AggregatedRoleProblems(const std::vector<json>& objects) {
  Problems problems;
  for (const auto& [name, want] : AggregatedRoles()) {
    const json role = FindObject(objects, "ClusterRole", name);
    if (role.is_null()) {
      problems.push_back("no ClusterRole " + name);
      continue;
    }
    if (At(role, {"rules"}) != want.rules) {
      problems.push_back("ClusterRole " + name + ": rules must be\n" + want.rules.dump(2) +
                         "\nbut are:\n" + At(role, {"rules"}).dump(2));
    }
    const json labels = At(role, {"metadata", "labels"});
    for (const auto& [key, value] : want.labels.items()) {
      if (At(labels, {key.c_str()}) != value) {
        problems.push_back("ClusterRole " + name + ": needs label " + key + ": " + value.dump());
      }
    }
    // Aggregated nowhere else: view's rules must not reach edit's users
    // only through an extra label, nor edit's reach view's.
    if (labels.is_object()) {
      for (const auto& [key, value] : labels.items()) {
        if (key.rfind("rbac.authorization.k8s.io/aggregate-to-", 0) == 0 &&
            !want.labels.contains(key)) {
          problems.push_back("ClusterRole " + name + ": aggregated by " + key + " too");
        }
      }
    }
    if (role.contains("aggregationRule")) {
      problems.push_back("ClusterRole " + name + ": has an aggregationRule (it is aggregated, "
                         "it aggregates nothing)");
    }
  }
  return problems;
}

Problems OperatorDeploymentProblems(const std::vector<json>& objects) {
  const json deployment = OperatorDeployment(objects);
  if (deployment.is_null()) return {"no Deployment gaptrain-operator"};
  Problems problems;
  auto expect = [&](bool ok, const std::string& what) {
    if (!ok) problems.push_back("Deployment gaptrain-operator: " + what);
  };
  const json pod = At(deployment, {"spec", "template", "spec"});
  const json container = OperatorContainer(deployment);
  expect(At(pod, {"containers"}).size() == 1, "one container");
  expect(Str(At(container, {"name"})) == "operator",
         "the container is named \"operator\" (the operator gives job pods its image)");
  expect(At(container, {"command"}) == json::array({kOperator}), "command [gaptrain-operator]");

  std::vector<std::string> args;
  for (const json& a : At(container, {"args"})) {
    expect(a.is_string(), "args are strings, got " + a.dump());
    args.push_back(Str(a));
  }
  OperatorOptions options;
  const Status parsed = ParseOperatorFlags(args, {{"POD_NAME", "gaptrain-operator-0"}}, &options);
  expect(parsed.ok(), "gaptrain-operator refuses its args: " + parsed.ToString());
  if (!parsed.ok()) return problems;

  const json replicas = At(deployment, {"spec", "replicas"});
  expect(replicas.is_number_integer() && replicas.get<int>() >= 2, "at least 2 replicas");
  expect(options.leader_elect, "--leader-elect must be true with more than one replica");
  // The image is named once: job pods get the container's own
  // (operator/job_image.h), so an image override changes both.
  expect(!options.image_given, "no --image (" + options.job.image +
                                   "): job pods get the operator container's image (" +
                                   Str(At(container, {"image"})) + ")");
  expect(!Str(At(container, {"image"})).empty(), "the container names an image");
  expect(SelectorMatches(At(deployment, {"spec", "selector"}),
                         At(deployment, {"spec", "template", "metadata", "labels"})),
         "its selector matches its pod template");
  // Job NetworkPolicies admit the operator's reads of job pods by this label.
  expect(Str(At(deployment, {"spec", "template", "metadata", "labels",
                             trainingjob::kOperatorPodLabel})) ==
             trainingjob::kOperatorPodLabelValue,
         std::string("its pods are labelled ") + trainingjob::kOperatorPodLabel + ": " +
             trainingjob::kOperatorPodLabelValue +
             " (job NetworkPolicies admit the operator's pods by it)");

  // The downward API: the pod's name in the Lease and Events, its
  // namespace for the Lease.
  std::map<std::string, std::string> field_of;
  for (const json& e : At(container, {"env"})) {
    field_of[Str(At(e, {"name"}))] = Str(At(e, {"valueFrom", "fieldRef", "fieldPath"}));
  }
  expect(field_of["POD_NAME"] == "metadata.name", "env POD_NAME from fieldRef metadata.name");
  expect(field_of["POD_NAMESPACE"] == "metadata.namespace",
         "env POD_NAMESPACE from fieldRef metadata.namespace");

  std::map<std::string, int> port_of;
  for (const json& p : At(container, {"ports"})) port_of[Str(At(p, {"name"}))] = IntOr(At(p, {"containerPort"}), -1);
  expect(port_of.count("metrics") && port_of["metrics"] == options.metrics_port,
         "a port named metrics with --metrics-port's number (" +
             std::to_string(options.metrics_port) + ")");
  expect(port_of.count("health") && port_of["health"] == options.health_port,
         "a port named health with --health-port's number (" +
             std::to_string(options.health_port) + ")");
  for (const auto& [probe, path] : {std::pair<const char*, const char*>{"livenessProbe", "/healthz"},
                                    {"readinessProbe", "/readyz"}}) {
    const json get = At(container, {probe, "httpGet"});
    const json port = At(get, {"port"});
    const int number = port.is_string() ? (port_of.count(Str(port)) ? port_of[Str(port)] : -1)
                                        : (port.is_number_integer() ? port.get<int>() : -1);
    expect(Str(At(get, {"path"})) == path && number == options.health_port,
           std::string(probe) + ": GET " + path + " on the health port");
  }

  for (const char* path : {"requests.cpu", "requests.memory", "limits.memory"}) {
    const std::string p(path);
    const json v = At(container, {"resources", p.substr(0, p.find('.')).c_str(),
                                  p.substr(p.find('.') + 1).c_str()});
    expect(v.is_string() || v.is_number(), std::string("resources.") + path);
  }
  const json security = At(container, {"securityContext"});
  expect(At(security, {"allowPrivilegeEscalation"}) == false, "allowPrivilegeEscalation: false");
  expect(At(security, {"readOnlyRootFilesystem"}) == true, "readOnlyRootFilesystem: true");
  expect(At(security, {"capabilities", "drop"}) == json::array({"ALL"}), "capabilities drop [ALL]");
  const json non_root = At(security, {"runAsNonRoot"}).is_null()
                            ? At(pod, {"securityContext", "runAsNonRoot"})
                            : At(security, {"runAsNonRoot"});
  expect(non_root == true, "runAsNonRoot: true");
  // The image's user (65532:65532, numeric, so runAsNonRoot can check it),
  // not a fixed uid, which OpenShift's restricted-v2 refuses (it assigns
  // one from the namespace's range).
  for (const char* field : {"runAsUser", "runAsGroup"}) {
    expect(At(security, {field}).is_null() && At(pod, {"securityContext", field}).is_null(),
           std::string("no ") + field + " (the image's user runs it; OpenShift assigns its own)");
  }
  return problems;
}

Problems ScrapeProblems(const std::vector<json>& objects, const json& scrape_config) {
  const json deployment = OperatorDeployment(objects);
  if (deployment.is_null()) return {"no Deployment gaptrain-operator"};
  Problems problems;
  const json job = ScrapeJob(scrape_config, kOperator);
  const json jobs = ScrapeJob(scrape_config, "gaptrain");
  if (job.is_null() || jobs.is_null()) return {"prometheus-scrape.yml: no gaptrain-operator or gaptrain job"};
  const Pod pod = OperatorPod(deployment);
  const std::set<std::string> kept = KeptPorts(job, pod);
  if (kept != std::set<std::string>{"metrics"}) {
    problems.push_back("prometheus-scrape.yml's gaptrain-operator job should keep the operator "
                       "pods' metrics port only, keeps " + Join(kept) + " (pod labels " +
                       pod.labels.dump() + ")");
  }
  if (!KeptPorts(jobs, pod).empty()) {
    problems.push_back("prometheus-scrape.yml's gaptrain job (TrainingJob pods) keeps the operator");
  }
  // Plain Prometheus by annotation: the same port.
  const json annotations = At(deployment, {"spec", "template", "metadata", "annotations"});
  int metrics_port = -1;
  for (const json& p : pod.ports) {
    if (Str(At(p, {"name"})) == "metrics") metrics_port = IntOr(At(p, {"containerPort"}), -1);
  }
  if (Str(At(annotations, {"prometheus.io/scrape"})) != "true" ||
      Str(At(annotations, {"prometheus.io/port"})) != std::to_string(metrics_port) ||
      Str(At(annotations, {"prometheus.io/path"})) != "/metrics") {
    problems.push_back("the operator's pods need annotations prometheus.io/scrape \"true\", "
                       "prometheus.io/port \"" + std::to_string(metrics_port) +
                       "\", prometheus.io/path /metrics; got " + annotations.dump());
  }
  return problems;
}

Problems PodMonitorProblems(const std::vector<json>& objects, const json& scrape_config) {
  Problems problems;
  const json deployment = OperatorDeployment(objects);
  const json for_operator = FindObject(objects, "PodMonitor", kOperator);
  const json for_jobs = FindObject(objects, "PodMonitor", "gaptrain-jobs");
  if (deployment.is_null() || for_operator.is_null() || for_jobs.is_null()) {
    return {"want Deployment gaptrain-operator, PodMonitors gaptrain-operator and gaptrain-jobs"};
  }
  const json operator_job = ScrapeJob(scrape_config, kOperator);
  const json jobs_job = ScrapeJob(scrape_config, "gaptrain");
  const Pod operator_pod = OperatorPod(deployment);
  if (PodMonitorPorts(for_operator, operator_pod) != KeptPorts(operator_job, operator_pod)) {
    problems.push_back("PodMonitor gaptrain-operator scrapes ports " +
                       Join(PodMonitorPorts(for_operator, operator_pod)) +
                       " of the operator's pods, prometheus-scrape.yml " +
                       Join(KeptPorts(operator_job, operator_pod)));
  }
  for (const Pod& pod : {JobPod(true), JobPod(false), operator_pod}) {
    if (PodMonitorPorts(for_jobs, pod) != KeptPorts(jobs_job, pod)) {
      problems.push_back("PodMonitor gaptrain-jobs scrapes ports " +
                         Join(PodMonitorPorts(for_jobs, pod)) + " of a pod labelled " +
                         pod.labels.dump() + ", prometheus-scrape.yml " +
                         Join(KeptPorts(jobs_job, pod)));
    }
  }
  if (PodMonitorPorts(for_operator, JobPod(true)).size() != 0) {
    problems.push_back("PodMonitor gaptrain-operator selects TrainingJob pods");
  }
  std::set<std::string> target_labels;
  for (const json& l : At(for_jobs, {"spec", "podTargetLabels"})) target_labels.insert(Sanitize(Str(l)));
  const std::set<std::string> mapped = LabelMapped(jobs_job, JobPod(true));
  if (target_labels != mapped) {
    problems.push_back("PodMonitor gaptrain-jobs: podTargetLabels give " + Join(target_labels) +
                       ", prometheus-scrape.yml's labelmap " + Join(mapped));
  }
  return problems;
}

Problems DashboardConfigMapProblems(const std::vector<json>& objects,
                                    const std::vector<std::string>& dashboard_files) {
  json config_map;
  for (const json& o : objects) {
    if (Str(At(o, {"kind"})) == "ConfigMap" &&
        At(o, {"metadata", "labels", "grafana_dashboard"}) == "1") {
      if (!config_map.is_null()) return {"more than one ConfigMap labelled grafana_dashboard"};
      config_map = o;
    }
  }
  if (config_map.is_null()) return {"no ConfigMap labelled grafana_dashboard: \"1\""};
  Problems problems;
  json want = json::object();
  for (const std::string& file : dashboard_files) {
    want[file.substr(file.rfind('/') + 1)] = ReadRaw(file);
  }
  const json data = At(config_map, {"data"});
  for (const auto& [key, text] : want.items()) {
    if (!data.is_object() || !data.contains(key)) {
      problems.push_back("dashboards ConfigMap: no " + key);
    } else if (data[key] != text) {
      problems.push_back("dashboards ConfigMap: " + key + " differs from the file");
    }
  }
  if (data.is_object() && data.size() != want.size()) {
    problems.push_back("dashboards ConfigMap: " + std::to_string(data.size()) + " entries, want " +
                       std::to_string(want.size()));
  }
  return problems;
}

Problems InstallProblems(const std::vector<nlohmann::json>& objects,
                         const nlohmann::json& scrape_config) {
  Problems problems;
  for (const Problems& p :
       {IdentityProblems(objects), RbacProblems(objects), AggregatedRoleProblems(objects),
        OperatorDeploymentProblems(objects), ScrapeProblems(objects, scrape_config)}) {
    problems.insert(problems.end(), p.begin(), p.end());
  }
  return problems;
}

}  // namespace gaptrain
