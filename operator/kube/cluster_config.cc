#include "operator/kube/cluster_config.h"

#include <sys/stat.h>

#include <cstdlib>
#include <vector>

#include "operator/kube/kubeconfig.h"
#include "operator/kube/pem.h"
#include "services/base/file_contents.h"

namespace gaptrain {
namespace kube {
namespace {

bool ParsePort(const std::string& text, uint16_t* port) {
  if (text.empty() || text.size() > 5) return false;
  unsigned value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  if (value == 0 || value > 65535) return false;
  *port = static_cast<uint16_t>(value);
  return true;
}

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string EnvValue(const Environment& env, const std::string& name) {
  auto it = env.find(name);
  return it == env.end() ? std::string() : it->second;
}

}  // namespace

std::string ServerUrl::HostPort() const {
  const std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return h + ":" + std::to_string(port);
}

Status ParseServerUrl(const std::string& url, ServerUrl* out) {
  auto bad = [&url](const std::string& why) {
    return Status::InvalidArgument("server URL '" + url + "': " + why);
  };
  ServerUrl parsed;
  std::string rest;
  if (url.rfind("https://", 0) == 0) {
    parsed.tls = true;
    parsed.port = 443;
    rest = url.substr(8);
  } else if (url.rfind("http://", 0) == 0) {
    parsed.tls = false;
    parsed.port = 80;
    rest = url.substr(7);
  } else {
    return bad("must start with https:// or http://");
  }
  if (rest.find_first_of("?#") != std::string::npos) return bad("must not have a query or fragment");
  const size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  if (slash != std::string::npos) parsed.base_path = rest.substr(slash);
  while (!parsed.base_path.empty() && parsed.base_path.back() == '/') parsed.base_path.pop_back();
  if (authority.find('@') != std::string::npos) return bad("must not hold user info");
  std::string port_text;
  if (!authority.empty() && authority[0] == '[') {
    const size_t close = authority.find(']');
    if (close == std::string::npos) return bad("unterminated [IPv6 address]");
    parsed.host = authority.substr(1, close - 1);
    const std::string after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return bad("unexpected text after ]");
      port_text = after.substr(1);
      if (port_text.empty()) return bad("empty port");
    }
  } else {
    const size_t colon = authority.find(':');
    parsed.host = authority.substr(0, colon);
    if (colon != std::string::npos) {
      if (authority.find(':', colon + 1) != std::string::npos) {
        return bad("an IPv6 address must be in brackets");
      }
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) return bad("empty port");
    }
  }
  if (parsed.host.empty()) return bad("no host");
  if (!port_text.empty() && !ParsePort(port_text, &parsed.port)) {
    return bad("port '" + port_text + "' is not a number in 1..65535");
  }
  *out = std::move(parsed);
  return Status::OK();
}

Environment ProcessEnvironment() {
  Environment env;
  for (const char* name : {"KUBECONFIG", "HOME", "KUBERNETES_SERVICE_HOST",
                           "KUBERNETES_SERVICE_PORT", "POD_NAMESPACE"}) {
    if (const char* value = std::getenv(name)) env[name] = value;
  }
  return env;
}

Status ReadTrimmedFile(const std::string& path, std::string* out) {
  std::string text;
  GAPTRAIN_RETURN_IF_ERROR(ReadFile(path, &text));
  const char* space = " \t\r\n";
  const size_t begin = text.find_first_not_of(space);
  *out = begin == std::string::npos
             ? ""
             : text.substr(begin, text.find_last_not_of(space) - begin + 1);
  return Status::OK();
}

Status LoadInClusterConfig(const std::string& dir, const Environment& env, ClusterConfig* out) {
  const std::string host = EnvValue(env, "KUBERNETES_SERVICE_HOST");
  const std::string port = EnvValue(env, "KUBERNETES_SERVICE_PORT");
  if (host.empty() || port.empty()) {
    return Status::NotFound(
        "in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not both set "
        "(not running in a pod)");
  }
  auto fail = [](const Status& s) {
    return Status(s.code(), "in-cluster config: " + s.message());
  };
  ClusterConfig config;
  config.source = "in-cluster config (" + dir + ")";
  const std::string bracketed = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  config.server = "https://" + bracketed + ":" + port;
  ServerUrl url;
  Status s = ParseServerUrl(config.server, &url);
  if (!s.ok()) {
    return fail(Status::InvalidArgument("KUBERNETES_SERVICE_HOST='" + host +
                                        "', KUBERNETES_SERVICE_PORT='" + port + "': " +
                                        s.message()));
  }
  const std::string ca_file = dir + "/ca.crt";
  s = ReadFile(ca_file, &config.ca_pem);
  if (!s.ok()) return fail(s);
  s = CheckCertificatesPem(config.ca_pem);
  if (!s.ok()) return fail(Status::InvalidArgument(ca_file + ": " + s.message()));
  config.token_file = dir + "/token";
  if (!FileExists(config.token_file)) {
    return fail(Status::NotFound(config.token_file + ": no such file"));
  }
  std::string ns = EnvValue(env, "POD_NAMESPACE");
  if (ns.empty()) {
    if (!ReadTrimmedFile(dir + "/namespace", &ns).ok()) ns.clear();
  }
  if (!ns.empty()) config.default_namespace = ns;
  *out = std::move(config);
  return Status::OK();
}

Status ResolveClusterConfig(const ResolveOptions& options, ClusterConfig* out) {
  if (!options.kubeconfig.empty()) {
    return LoadKubeconfig({options.kubeconfig}, options.context, out);
  }
  std::string tried;
  const std::string list = EnvValue(options.env, "KUBECONFIG");
  if (!list.empty()) {
    std::vector<std::string> existing;
    for (const std::string& file : SplitKubeconfigList(list)) {
      if (FileExists(file)) existing.push_back(file);
    }
    if (!existing.empty()) return LoadKubeconfig(existing, options.context, out);
    tried += "KUBECONFIG=" + list + " (no such files); ";
  } else {
    const std::string home = EnvValue(options.env, "HOME");
    if (!home.empty()) {
      const std::string file = home + "/.kube/config";
      if (FileExists(file)) return LoadKubeconfig({file}, options.context, out);
      tried += file + " (no such file); ";
    } else {
      tried += "~/.kube/config (HOME is not set); ";
    }
  }
  if (EnvValue(options.env, "KUBERNETES_SERVICE_HOST").empty() ||
      EnvValue(options.env, "KUBERNETES_SERVICE_PORT").empty()) {
    return Status::NotFound("no Kubernetes configuration: tried " + tried +
                            "in-cluster (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are "
                            "not both set); pass --kubeconfig");
  }
  return LoadInClusterConfig(options.service_account_dir, options.env, out);
}

}  // namespace kube
}  // namespace gaptrain
