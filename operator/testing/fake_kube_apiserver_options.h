// How fake-kube-apiserver (the FakeApiServer as a process, for trying the
// operator by hand and for process-level tests) is started: its flags.

#ifndef GAPTRAIN_OPERATOR_TESTING_FAKE_KUBE_APISERVER_OPTIONS_H_
#define GAPTRAIN_OPERATOR_TESTING_FAKE_KUBE_APISERVER_OPTIONS_H_

#include <string>
#include <vector>

#include "operator/testing/fake_api_server.h"
#include "services/common/status.h"

namespace gaptrain {
namespace kube_testing {

struct FakeKubeApiserverOptions {
  FakeApiServer::Options server;  // --address, --port, --token, --crd, ...
  std::string kubeconfig;         // --kubeconfig PATH: written once serving
  std::string ports_file;         // --ports-file PATH: the port, once serving
  std::string kubeconfig_namespace = "default";  // --namespace
};

// Parses flags (argv[0] excluded) and reads the --crd files. Without
// --token a random token is made up (written to the kubeconfig); --no-auth
// accepts every request. Errors name the flag.
Status ParseFakeKubeApiserverFlags(const std::vector<std::string>& args,
                                   FakeKubeApiserverOptions* options);

std::string FakeKubeApiserverUsage();

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_FAKE_KUBE_APISERVER_OPTIONS_H_
