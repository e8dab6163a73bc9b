// HelmTemplate: renders and lints a chart with helm-template, Helm 3.11.2's
// own chart engine behind a minimal CLI (../shared/envtest/README.md), so
// tests check what `helm install` would create rather than an imitation.
//
// What the caller may rely on:
//   - Find() looks for helm-template where envtest::FindTool does
//     ($KUBEBUILDER_ASSETS, else ../shared/envtest/setup.sh; a test using it
//     declares data = ["//:README.md"]); its error says what is missing and
//     how to get it, for GAPTRAIN_SKIP_OR_FAIL_IN_CI.
//   - The binary is exec'd with the arguments as given (no shell), stdin
//     /dev/null; a call returns once it has exited.
//   - Values apply in Helm's order: `files` (-f) in order, then
//     `overrides` (written to a values file in a fresh temporary directory,
//     passed as the last -f), then `set`, then `set_string`; later wins,
//     maps merge key by key.
//   - A non-zero exit is an error whose message holds the command line,
//     the exit status and everything helm-template wrote to stderr.
// Thread-compatible: distinct objects may be used from distinct threads.

#ifndef GAPTRAIN_HELM_HELM_TEMPLATE_H_
#define GAPTRAIN_HELM_HELM_TEMPLATE_H_

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

struct RenderedChart {
  // stdout: every rendered template as a YAML document headed
  // "# Source: CHART/templates/FILE" (crds/ not included).
  std::string manifests;
  // templates/NOTES.txt rendered. `helm template` drops it; helm-template
  // prints it to stderr after a line "NOTES:", followed by a newline of
  // its own (as `helm install` prints it to stdout), whence this is taken.
  // "" when the chart has none.
  std::string notes;
  std::string stderr_text;  // all of it, NOTES included
};

class HelmTemplate {
 public:
  static Status Find(HelmTemplate* out);
  explicit HelmTemplate(std::string binary = "") : binary_(std::move(binary)) {}

  // `helm-template template chart_dir --name --namespace ...`.
  Status Template(const std::string& chart_dir, const HelmRelease& release,
                  const HelmValues& values, RenderedChart* out) const;

  // `helm-template lint chart_dir ...`: OK when Helm's linter finds no
  // error; *output gets its report ("[INFO] ...", "[WARNING] ...") either way.
  Status Lint(const std::string& chart_dir, const HelmValues& values, std::string* output) const;

  const std::string& binary() const { return binary_; }

 private:
  std::string binary_;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_HELM_HELM_TEMPLATE_H_
