// ClusterConfig: how to reach and authenticate to one Kubernetes API server,
// and where it comes from: a kubeconfig file, the service-account files a
// pod gets, or ResolveClusterConfig choosing between them the way kubectl
// and client-go do.
//
// What callers may rely on:
//   - Certificates and keys are held as PEM text, already read from their
//     files and checked to parse, so a loaded config is complete; only the
//     token file is read again later (service-account tokens rotate; see
//     BearerToken).
//   - Every error names its source and field, e.g.
//     "kubeconfig /x/config: users[0].user.client-key-data: not valid base64"
//     or "in-cluster config: /var/run/secrets/.../ca.crt: cannot read: ...".

#ifndef GAPTRAIN_OPERATOR_KUBE_CLUSTER_CONFIG_H_
#define GAPTRAIN_OPERATOR_KUBE_CLUSTER_CONFIG_H_

#include <cstdint>
#include <map>
#include <string>

#include "services/base/status.h"

namespace gaptrain {
namespace kube {

struct ClusterConfig {
  // "https://10.96.0.1:443", "http://127.0.0.1:8080", optionally with a
  // path prefix ("https://proxy/k8s/clusters/c1").
  std::string server;
  std::string ca_pem;  // trusted CAs; "" means the system's roots
  std::string client_certificate_pem;
  std::string client_key_pem;
  std::string token;       // sent as "Authorization: Bearer" unless token_file is set
  std::string token_file;  // re-read when it changes; wins over token
  bool insecure_skip_tls_verify = false;
  // Verify the server certificate (and send SNI) for this name instead of
  // the URL's host (kubeconfig: tls-server-name).
  std::string tls_server_name;
  std::string default_namespace = "default";
  // Where this came from, for messages: "kubeconfig /x/config, context kind-gaptrain".
  std::string source;
};

// The parts of ClusterConfig::server.
struct ServerUrl {
  bool tls = true;
  std::string host;  // without brackets: "10.0.0.1", "::1", "kubernetes.default.svc"
  uint16_t port = 443;
  std::string base_path;  // "" or "/prefix", never ending in '/'

  // "host:port", bracketed for IPv6: the Host header.
  std::string HostPort() const;
};

// Accepts http:// and https:// URLs with an optional port and path; no
// query, fragment or user info.
Status ParseServerUrl(const std::string& url, ServerUrl* out);

// The environment variables the loaders read (tests pass their own).
using Environment = std::map<std::string, std::string>;
// KUBECONFIG, HOME, KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT and
// POD_NAMESPACE from this process's environment, where set.
Environment ProcessEnvironment();

constexpr char kServiceAccountDir[] = "/var/run/secrets/kubernetes.io/serviceaccount";

// The config a pod has: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT
// (IPv6 hosts bracketed), `dir`/ca.crt, `dir`/token (as token_file) and the
// namespace from $POD_NAMESPACE, else `dir`/namespace, else "default".
// NOT_FOUND when the two variables are unset (not running in a cluster).
Status LoadInClusterConfig(const std::string& dir, const Environment& env, ClusterConfig* out);

struct ResolveOptions {
  std::string kubeconfig;  // --kubeconfig: used alone when set, must load
  std::string context;     // --context: "" means the kubeconfig's current-context
  Environment env;
  std::string service_account_dir = kServiceAccountDir;
};

// kubectl's order: the explicit kubeconfig; else the files in $KUBECONFIG
// (colon-separated, missing ones skipped, the rest merged as kubectl does);
// else $HOME/.kube/config when it exists; else the in-cluster config. A
// set $KUBECONFIG replaces $HOME/.kube/config, as for kubectl. NOT_FOUND,
// listing what was tried, when none applies.
Status ResolveClusterConfig(const ResolveOptions& options, ClusterConfig* out);

// A whole file (ReadFile, services/base/file_contents.h) without leading and
// trailing whitespace (token and namespace files end with a newline).
Status ReadTrimmedFile(const std::string& path, std::string* out);

}  // namespace kube
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_KUBE_CLUSTER_CONFIG_H_
