// Fuzz target: kubeconfig files (kubeconfig.h). Each input is written as a
// file and loaded as $KUBECONFIG would be, with its current context.
// Contract:
//   - a bad file is INVALID_ARGUMENT (or NOT_FOUND for a file it names that
//     is missing) with a message, never a crash or an exception across the
//     API (yaml-cpp and base64 decoding see arbitrary text);
//   - on rejection the caller's ClusterConfig is left as it was;
//   - an accepted config has a server URL that parses, PEM blocks that
//     check, and says where it came from.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "operator/kube/cluster_config.h"
#include "operator/kube/kubeconfig.h"
#include "operator/kube/pem.h"
#include "services/testing/fuzz_contract.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gaptrain;
  using namespace gaptrain::kube;
  const std::string path = FuzzScratchPath("config");
  FuzzWriteFile(path, data, size);

  ClusterConfig config;
  config.server = "unchanged";
  config.default_namespace = "unchanged";
  Status loaded = LoadKubeconfig({path}, "", &config);
  if (!loaded.ok()) {
    FuzzExpectRejection(loaded, {Status::Code::kInvalidArgument, Status::Code::kNotFound},
                        "LoadKubeconfig");
    FuzzExpect(config.server == "unchanged" && config.default_namespace == "unchanged" &&
                   config.source.empty() && config.token.empty(),
               "LoadKubeconfig changed the config on rejection");
    return 0;
  }
  ServerUrl url;
  Status parsed = ParseServerUrl(config.server, &url);
  FuzzExpect(parsed.ok(), "accepted a server URL that does not parse: " + parsed.ToString());
  if (!config.ca_pem.empty()) {
    FuzzExpect(CheckCertificatesPem(config.ca_pem).ok(), "accepted a CA that does not check");
  }
  FuzzExpect(!config.source.empty(), "an accepted config does not say where it came from");
  return 0;
}
