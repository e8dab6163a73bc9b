// Helm: runs the real `helm` (Helm 3, built by scripts/test-cluster.sh
// from helm.sh/helm/v3 and found with the envtest assets), so tests check
// what `helm template`, `helm lint` and `helm install` do with a chart
// rather than an imitation.
//
// What the caller may rely on:
//   - Find() looks for `helm` where envtest::FindTool does
//     ($KUBEBUILDER_ASSETS, else what scripts/test-cluster.sh built; a test
//     using it declares data = ["//:README.md"]); its error says what is
//     missing and how to get it, for GAPTRAIN_SKIP_OR_FAIL_IN_CI.
//   - The binary is exec'd with the arguments as given (no shell), stdin
//     /dev/null, on a copy of the chart with its links followed, and Helm's
//     cache, configuration and data homes in a fresh temporary directory
//     (no user's repositories, plugins or registry logins); a call returns
//     once it has exited.
//   - Values apply in Helm's order: `files` (-f) in order, then
//     `overrides` (written to a values file, passed as the last -f), then
//     `set`, then `set_string`; later wins, maps merge key by key.
//   - A non-zero exit is an error whose message holds the command line,
//     the exit status and everything helm wrote to stderr.
// Thread-compatible: distinct objects may be used from distinct threads.

#ifndef GAPTRAIN_HELM_HELM_H_
#define GAPTRAIN_HELM_HELM_H_

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "services/base/status.h"

namespace gaptrain {

struct HelmRelease {
  std::string name = "gaptrain";
  std::string name_space = "gaptrain-system";
};

struct HelmValues {
  std::vector<std::string> files;                       // -f PATH
  nlohmann::json overrides = nlohmann::json::object();  // as a values file
  std::vector<std::string> set;         // --set a.b=v (Helm's strvals syntax)
  std::vector<std::string> set_string;  // --set-string a.b=v
};

class Helm {
 public:
  static Status Find(Helm* out);
  explicit Helm(std::string binary = "") : binary_(std::move(binary)) {}

  // `helm template NAME CHART --namespace NS ...`: *manifests gets every
  // rendered template as a YAML document headed "# Source: CHART/templates/
  // FILE" (crds/ not included, NOTES.txt not rendered).
  Status Template(const std::string& chart_dir, const HelmRelease& release,
                  const HelmValues& values, std::string* manifests) const;

  // `helm lint CHART ...`: OK when Helm's linter finds no error; *report
  // gets its findings ("[INFO] ...", "[WARNING] ...") either way.
  Status Lint(const std::string& chart_dir, const HelmValues& values, std::string* report) const;

  // `helm install NAME CHART --namespace NS --create-namespace --output
  // json ...` against the cluster `kubeconfig_file` names; *release gets
  // the release Helm reports (its "manifest", "info.notes", "info.status").
  // With `dry_run`, --dry-run=client: nothing is created (Helm still asks
  // the cluster its version), and info.notes is NOTES.txt rendered as an
  // install shows it, which `helm template` does not print.
  Status Install(const std::string& chart_dir, const HelmRelease& release,
                 const HelmValues& values, const std::string& kubeconfig_file, bool dry_run,
                 nlohmann::json* release_json) const;

  // `helm uninstall NAME --namespace NS --wait`: the release's objects are
  // gone when it returns (its CRDs stay, as Helm leaves them).
  Status Uninstall(const HelmRelease& release, const std::string& kubeconfig_file) const;

  const std::string& binary() const { return binary_; }

 private:
  // Runs `helm BEFORE... CHART AFTER... VALUE-FLAGS...`, CHART a copy of
  // chart_dir (none when it is ""); *out is stdout, *err stderr.
  Status Run(const std::vector<std::string>& before, const std::string& chart_dir,
             const std::vector<std::string>& after, const HelmValues& values, std::string* out,
             std::string* err) const;

  std::string binary_;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_HELM_HELM_H_
