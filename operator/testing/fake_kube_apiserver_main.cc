// fake-kube-apiserver: FakeApiServer as a process. Wiring only: flags,
// start, the kubeconfig and ports file, and SIGTERM/SIGINT to stop.

#include <cstdio>
#include <string>
#include <vector>

#include "operator/testing/fake_api_server.h"
#include "operator/testing/fake_kube_apiserver_options.h"
#include "services/common/atomic_file.h"
#include "services/common/ports_file.h"
#include "services/common/termination_signal.h"

int main(int argc, char** argv) {
  using gaptrain::Status;
  using gaptrain::kube_testing::FakeApiServer;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && (args[0] == "-h" || args[0] == "--help")) {
    std::fputs(gaptrain::kube_testing::FakeKubeApiserverUsage().c_str(), stdout);
    return 0;
  }
  gaptrain::kube_testing::FakeKubeApiserverOptions options;
  Status s = gaptrain::kube_testing::ParseFakeKubeApiserverFlags(args, &options);
  if (!s.ok()) {
    std::fprintf(stderr, "fake-kube-apiserver: %s\n%s", s.message().c_str(),
                 gaptrain::kube_testing::FakeKubeApiserverUsage().c_str());
    return 2;
  }
  if (Status t = gaptrain::TerminationSignal::Install(); !t.ok()) {
    std::fprintf(stderr, "fake-kube-apiserver: %s\n", t.ToString().c_str());
    return 1;
  }
  std::unique_ptr<FakeApiServer> server;
  s = FakeApiServer::Start(options.server, &server);
  if (!s.ok()) {
    std::fprintf(stderr, "fake-kube-apiserver: cannot start: %s\n", s.ToString().c_str());
    return 1;
  }
  if (!options.kubeconfig.empty()) {
    const std::string config = server->Kubeconfig(options.kubeconfig_namespace);
    s = gaptrain::WriteFileAtomically(options.kubeconfig, config.data(), config.size());
    if (!s.ok()) {
      std::fprintf(stderr, "fake-kube-apiserver: --kubeconfig: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  if (!options.ports_file.empty()) {
    s = gaptrain::WritePortsFile(options.ports_file, {server->port()});
    if (!s.ok()) {
      std::fprintf(stderr, "fake-kube-apiserver: --ports-file: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  std::fprintf(stderr, "fake-kube-apiserver: serving %s\n", server->url().c_str());
  gaptrain::TerminationSignal::Wait();
  server->Stop();
  std::fprintf(stderr, "fake-kube-apiserver: stopped\n");
  return 0;
}
