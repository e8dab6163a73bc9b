// ChartRenderer: renders helm/gaptrain's templates the way `helm template`
// would, for tests on a machine without Helm. It implements only the subset
// of Go templates and Helm functions the chart restricts itself to, and
// refuses everything else with an error naming the template and the
// construct, so a template that strays outside the subset fails the test
// instead of being rendered wrongly:
//
//   {{ PIPELINE }}, {{- ... -}} (trim the whitespace before / after),
//   {{/* comment */}}, {{ if PIPELINE }} ... {{ else }} ... {{ end }}
//   values: .Values.a.b (a missing key is an error, where Helm prints ""),
//     .Release.Name, .Release.Namespace, .Release.Service, .Chart.Name,
//     .Chart.Version, .Chart.AppVersion, "string" and integer literals
//   functions: quote, default X, toYaml, indent N, nindent N, .Files.Get "path"
//   pipelines: a | f b  is  f b a
//
// Truth and emptiness follow Go templates (false, 0, "", null, empty lists
// and maps are false). A number prints as an integer; numbers that Go would
// print in exponent form (1e+06) or with a fraction are refused. toYaml
// writes block YAML with every string double-quoted: the same data as
// Helm's toYaml (sigs.k8s.io/yaml), not the same bytes, which the tests
// never compare (they compare parsed objects).

#ifndef GAPTRAIN_HELM_CHART_RENDERER_H_
#define GAPTRAIN_HELM_CHART_RENDERER_H_

#include <nlohmann/json.hpp>

#include <map>
#include <string>

#include "services/common/status.h"

namespace gaptrain {

struct ChartRelease {
  std::string name = "gaptrain";
  std::string name_space = "gaptrain-system";
};

class ChartRenderer {
 public:
  // `chart_dir` holds Chart.yaml, values.yaml and templates/; `values`
  // overrides values.yaml (merged key by key, as `helm -f` does).
  static Status Load(const std::string& chart_dir, const nlohmann::json& value_overrides,
                     const ChartRelease& release, ChartRenderer* out);

  // Renders templates/`name` (e.g. "deployment.yaml", "NOTES.txt").
  Status Render(const std::string& name, std::string* out) const;

  // Every templates/*.yaml rendered, by file name (partials, "_*", skipped).
  Status RenderAll(std::map<std::string, std::string>* out) const;

  // Renders `text` as a template named `name` (for tests of the subset).
  Status RenderText(const std::string& name, const std::string& text, std::string* out) const;

  const nlohmann::json& values() const { return context_["Values"]; }

 private:
  std::string chart_dir_;
  nlohmann::json context_;  // {"Values": ..., "Release": ..., "Chart": ...}
};

}  // namespace gaptrain

#endif  // GAPTRAIN_HELM_CHART_RENDERER_H_
