// ChartRenderer renders its subset of Go templates as Helm does (output
// compared as text, or as parsed YAML where toYaml's formatting differs
// from Helm's), and refuses what lies outside it.

#include "helm/chart_renderer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "operator/testing/yaml_to_json.h"
#include "services/testing/test_files.h"

namespace gaptrain {
namespace {

using nlohmann::json;

class ChartRendererTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TestDir("chart");
    WriteRaw(dir_ + "/Chart.yaml", "apiVersion: v2\nname: demo\nversion: 1.2.3\nappVersion: \"4.5\"\n");
    WriteRaw(dir_ + "/values.yaml",
             "image: {repository: repo/demo, tag: \"\"}\n"
             "replicas: 2\n"
             "big: 1000000\n"
             "half: 0.5\n"
             "enabled: true\n"
             "disabled: false\n"
             "empty: {}\n"
             "none: []\n"
             "preset: '{\"tolerations\": [{\"key\": \"spot\"}]}'\n"
             "resources: {requests: {cpu: 100m, memory: 64Mi}, limits: {memory: \"1\"}}\n"
             "tricky: [\"true\", \"1\", \"a: b\", \"\", \"#x\", {}, [], null, 3, false]\n");
    WriteRaw(dir_ + "/note.txt", "line one\nline two\n");
    ASSERT_TRUE(ChartRenderer::Load(dir_, json::object(), ChartRelease{"rel", "team-a"}, &chart_).ok());
  }

  std::string Render(const std::string& text) {
    std::string out;
    const Status s = chart_.RenderText("t", text, &out);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return out;
  }

  std::string Refusal(const std::string& text) {
    std::string out;
    const Status s = chart_.RenderText("t", text, &out);
    EXPECT_FALSE(s.ok()) << text << " rendered as: " << out;
    return s.message();
  }

  std::string dir_;
  ChartRenderer chart_;
};

TEST_F(ChartRendererTest, ValuesReleaseAndChart) {
  EXPECT_EQ(Render("n: {{ .Release.Namespace }}, r: {{ .Release.Name }}, s: {{ .Release.Service }}"),
            "n: team-a, r: rel, s: Helm");
  EXPECT_EQ(Render("{{ .Chart.Name }} {{ .Chart.Version }} {{ .Chart.AppVersion }}"), "demo 1.2.3 4.5");
  EXPECT_EQ(Render("replicas: {{ .Values.replicas }} on: {{ .Values.enabled }}"), "replicas: 2 on: true");
  EXPECT_EQ(Render("{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}"),
            "repo/demo:4.5");
  EXPECT_EQ(Render("{{ \"x\" | default \"y\" }} {{ default \"y\" .Values.image.tag }}"), "x y");
}

TEST_F(ChartRendererTest, TrimMarkersEatTheWhitespaceOnTheirSide) {
  EXPECT_EQ(Render("a:\n  {{- \" b\" }}\n"), "a: b\n");
  EXPECT_EQ(Render("a: {{ 1 -}}  \n\n  x"), "a: 1x");
  EXPECT_EQ(Render("x\n{{- /* a comment */ -}}\ny"), "xy");
  EXPECT_EQ(Render("a-{{ 2 }}-b"), "a-2-b");  // a dash without a space is no marker
}

TEST_F(ChartRendererTest, IfElseFollowGoTruth) {
  const std::string t = "{{- if VALUE }}yes{{ else }}no{{ end }}";
  auto with = [&](const std::string& v) {
    std::string s = t;
    s.replace(s.find("VALUE"), 5, v);
    return Render(s);
  };
  EXPECT_EQ(with(".Values.enabled"), "yes");
  EXPECT_EQ(with(".Values.disabled"), "no");
  EXPECT_EQ(with(".Values.empty"), "no");
  EXPECT_EQ(with(".Values.none"), "no");
  EXPECT_EQ(with(".Values.image.tag"), "no");
  EXPECT_EQ(with(".Values.image"), "yes");
  EXPECT_EQ(with(".Values.replicas"), "yes");
  EXPECT_EQ(Render("a\n{{- if .Values.enabled }}\nb\n{{- if .Values.disabled }}\nc\n{{- end }}\n{{- end }}\n"),
            "a\nb\n");
}

TEST_F(ChartRendererTest, ToYamlNindentGivesTheSameDataBack) {
  const std::string out =
      Render("spec:\n  resources:\n    {{- toYaml .Values.resources | nindent 4 }}\n"
             "  tricky:\n    {{- toYaml .Values.tricky | nindent 4 }}\n"
             "  empty: {{ toYaml .Values.empty }}\n");
  json parsed;
  const Status s = kube_testing::YamlToJson(out, &parsed);
  ASSERT_TRUE(s.ok()) << s.ToString() << "\n" << out;
  EXPECT_EQ(parsed["spec"]["resources"], chart_.values()["resources"]) << out;
  EXPECT_EQ(parsed["spec"]["tricky"], chart_.values()["tricky"]) << out;
  EXPECT_EQ(parsed["spec"]["empty"], json::object());
}

TEST_F(ChartRendererTest, QuoteKeepsAStringWhole) {
  const std::string out = Render("args:\n- --spot-preset\n- {{ .Values.preset | quote }}\n- {{ .Values.replicas | quote }}\n");
  json parsed;
  ASSERT_TRUE(kube_testing::YamlToJson(out, &parsed).ok()) << out;
  EXPECT_EQ(parsed["args"][1], chart_.values()["preset"]);
  EXPECT_EQ(parsed["args"][2], "2");
}

TEST_F(ChartRendererTest, FilesGetAndIndent) {
  EXPECT_EQ(Render("data:\n  note: |\n{{ .Files.Get \"note.txt\" | indent 4 }}\n"),
            "data:\n  note: |\n    line one\n    line two\n    \n");
  EXPECT_NE(Refusal("{{ .Files.Get \"../Chart.yaml\" }}").find("not a path inside the chart"),
            std::string::npos);
  EXPECT_NE(Refusal("{{ .Files.Get \"files/missing\" }}").find("files/missing"), std::string::npos);
}

TEST_F(ChartRendererTest, OverridesMergeKeyByKey) {
  ChartRenderer chart;
  ASSERT_TRUE(ChartRenderer::Load(dir_, {{"image", {{"tag", "9.9"}}}}, ChartRelease{}, &chart).ok());
  std::string out;
  ASSERT_TRUE(chart.RenderText("t", "{{ .Values.image.repository }}:{{ .Values.image.tag }} "
                                    "{{ .Release.Namespace }}", &out).ok());
  EXPECT_EQ(out, "repo/demo:9.9 gaptrain-system");
}

TEST_F(ChartRendererTest, RefusesWhatItCannotRenderFaithfully) {
  EXPECT_NE(Refusal("{{ .Values.imag.tag }}").find(".Values.imag is not defined"), std::string::npos);
  EXPECT_NE(Refusal("{{ .Values.preset | upper }}").find("'upper' is outside the subset"),
            std::string::npos);
  EXPECT_NE(Refusal("{{ range .Values.none }}x{{ end }}").find("'range' is outside"), std::string::npos);
  EXPECT_NE(Refusal("{{ include \"x\" . }}").find("'include' is outside"), std::string::npos);
  EXPECT_NE(Refusal("{{ if .Values.enabled }}x").find("without {{ end }}"), std::string::npos);
  EXPECT_NE(Refusal("x{{ end }}").find("without {{ if }}"), std::string::npos);
  EXPECT_NE(Refusal("{{ .Values.replicas").find("unclosed action"), std::string::npos);
  EXPECT_NE(Refusal("{{ .Values.big }}").find("Go's float form"), std::string::npos);
  EXPECT_NE(Refusal("{{ .Values.half }}").find("Go's float form"), std::string::npos);
  EXPECT_NE(Refusal("{{ .Values.resources }}").find("use toYaml"), std::string::npos);
  EXPECT_NE(Refusal("{{ .Values.preset | nindent \"x\" }}").find("nindent"), std::string::npos);
  EXPECT_NE(Refusal("{{ .Values.replicas .Values.enabled }}").find("takes no arguments"),
            std::string::npos);
}

}  // namespace
}  // namespace gaptrain
