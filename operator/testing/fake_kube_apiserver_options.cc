#include "operator/testing/fake_kube_apiserver_options.h"

#include <fstream>
#include <random>
#include <sstream>

#include "services/common/flag_values.h"

namespace gaptrain {
namespace kube_testing {

namespace {

Status ReadFile(const std::string& flag, const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument(flag + ": cannot read '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  *out = text.str();
  return Status::OK();
}

std::string RandomToken() {
  std::random_device device;
  static const char kHex[] = "0123456789abcdef";
  std::string token;
  for (int i = 0; i < 32; ++i) token += kHex[device() % 16];
  return token;
}

}  // namespace

std::string FakeKubeApiserverUsage() {
  return "usage: fake-kube-apiserver [flags]\n"
         "  An in-memory Kubernetes API server (a subset of kube-apiserver v1.26) for tests.\n"
         "  --address IP                 listen address [127.0.0.1]\n"
         "  --port N                     listen port [0: ephemeral]\n"
         "  --token TOKEN                bearer token clients must send [random]\n"
         "  --no-auth                    accept requests without a token\n"
         "  --kubeconfig PATH            write a kubeconfig for the server here\n"
         "  --namespace NS               the kubeconfig context's namespace [default]\n"
         "  --ports-file PATH            write the port here once serving\n"
         "  --crd PATH[,PATH...]         CRD manifests to install at start\n"
         "  --tls-cert PATH --tls-key PATH  serve HTTPS with this PEM certificate and key\n"
         "  --watch-history N            watch events kept per resource [10000]\n"
         "  --bookmark-interval-ms N     BOOKMARK period of watches [60000]\n";
}

Status ParseFakeKubeApiserverFlags(const std::vector<std::string>& args,
                                   FakeKubeApiserverOptions* options) {
  FakeApiServer::Options& server = options->server;
  std::string token;
  bool no_auth = false;
  std::string crds;
  uint64_t bookmark_ms = static_cast<uint64_t>(server.bookmark_interval.count());
  FlagSet flags;
  flags.String("--address", &server.address);
  flags.Unsigned("--port", 0, 65535, &server.port);
  flags.String("--token", &token);
  flags.Switch("--no-auth", &no_auth);
  flags.String("--kubeconfig", &options->kubeconfig);
  flags.String("--namespace", &options->kubeconfig_namespace);
  flags.String("--ports-file", &options->ports_file);
  flags.String("--crd", &crds);
  flags.String("--tls-cert", &server.tls_cert_file);
  flags.String("--tls-key", &server.tls_key_file);
  flags.Unsigned("--watch-history", 1, 10000000, &server.watch_history_size);
  flags.Unsigned("--bookmark-interval-ms", 1, 86400000, &bookmark_ms);
  GAPTRAIN_RETURN_IF_ERROR(flags.Parse(args));
  if (server.tls_cert_file.empty() != server.tls_key_file.empty()) {
    return Status::InvalidArgument("--tls-cert and --tls-key go together");
  }
  if (no_auth && !token.empty()) {
    return Status::InvalidArgument("--no-auth: cannot be combined with --token");
  }
  server.bearer_token = no_auth ? "" : (token.empty() ? RandomToken() : token);
  server.bookmark_interval = std::chrono::milliseconds(bookmark_ms);
  size_t start = 0;
  while (start < crds.size()) {
    size_t comma = crds.find(',', start);
    if (comma == std::string::npos) comma = crds.size();
    const std::string path = crds.substr(start, comma - start);
    if (!path.empty()) {
      std::string text;
      GAPTRAIN_RETURN_IF_ERROR(ReadFile("--crd", path, &text));
      server.custom_resource_definitions.push_back(std::move(text));
    }
    start = comma + 1;
  }
  return Status::OK();
}

}  // namespace kube_testing
}  // namespace gaptrain
