// HelmTemplate on a chart of two templates written here: values apply in
// Helm's order, strings stay strings, the notes are split from the
// manifests, and a failure carries Helm's own message.

#include "helm/helm_template.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "services/testing/missing_requirement.h"
#include "services/testing/test_files.h"

namespace gaptrain {
namespace {

using nlohmann::json;

class HelmTemplateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const Status found = HelmTemplate::Find(&helm_);
    if (!found.ok()) GAPTRAIN_SKIP_OR_FAIL_IN_CI(found.message());
    chart_ = TestDir("chart");
    WriteRaw(chart_ + "/Chart.yaml", "apiVersion: v2\nname: tiny\nversion: 0.1.0\n");
    WriteRaw(chart_ + "/values.yaml", "a: from-values-yaml\nb: {c: 1, d: 2}\ntext: plain\n");
    const std::string templates = chart_ + "/templates";
    std::filesystem::create_directories(templates);
    WriteRaw(templates + "/configmap.yaml",
             "apiVersion: v1\n"
             "kind: ConfigMap\n"
             "metadata:\n"
             "  name: {{ .Release.Name }}\n"
             "  namespace: {{ .Release.Namespace }}\n"
             "data:\n"
             "  a: {{ .Values.a | quote }}\n"
             "  b: {{ .Values.b | toJson | quote }}\n"
             "  text: {{ .Values.text | quote }}\n");
    WriteRaw(templates + "/NOTES.txt",
             "Installed {{ .Release.Name }} in {{ .Release.Namespace }}.\n");
  }

  // The ConfigMap's data as rendered.
  json Data(const std::string& manifests) {
    const std::string key = "\ndata:\n";
    const size_t at = manifests.find(key);
    if (at == std::string::npos) return nullptr;
    json data = json::object();
    size_t line = at + key.size();
    while (line < manifests.size() && manifests.compare(line, 2, "  ") == 0) {
      const size_t end = manifests.find('\n', line);
      const std::string text = manifests.substr(line + 2, end - line - 2);
      const size_t colon = text.find(": ");
      data[text.substr(0, colon)] = json::parse(text.substr(colon + 2));
      line = end + 1;
    }
    return data;
  }

  HelmTemplate helm_;
  std::string chart_;
};

TEST_F(HelmTemplateTest, ReleaseAndDefaults) {
  RenderedChart rendered;
  const Status s = helm_.Template(chart_, HelmRelease{"r1", "ns1"}, HelmValues(), &rendered);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_NE(rendered.manifests.find("# Source: tiny/templates/configmap.yaml"), std::string::npos)
      << rendered.manifests;
  EXPECT_NE(rendered.manifests.find("  name: r1\n  namespace: ns1\n"), std::string::npos)
      << rendered.manifests;
  EXPECT_EQ(Data(rendered.manifests),
            json({{"a", "from-values-yaml"}, {"b", R"({"c":1,"d":2})"}, {"text", "plain"}}));
  EXPECT_EQ(rendered.notes, "Installed r1 in ns1.\n") << rendered.stderr_text;
  EXPECT_EQ(rendered.manifests.find("Installed"), std::string::npos);
}

TEST_F(HelmTemplateTest, ValuesApplyInHelmsOrder) {
  const std::string file = TestDir("values") + "/values.yaml";
  WriteRaw(file, "a: from-file\nb: {c: 10}\ntext: from-file\n");
  HelmValues values;
  values.files = {file};
  values.overrides = {{"a", "from-overrides"}, {"text", "x,y={z}"}};
  values.set = {"b.d=20", "a=from-set"};
  values.set_string = {"a=from-set-string"};
  RenderedChart rendered;
  const Status s = helm_.Template(chart_, HelmRelease(), values, &rendered);
  ASSERT_TRUE(s.ok()) << s.ToString();
  // Maps merge key by key; the overrides keep commas and braces as text.
  EXPECT_EQ(Data(rendered.manifests),
            json({{"a", "from-set-string"}, {"b", R"({"c":10,"d":20})"}, {"text", "x,y={z}"}}));
}

TEST_F(HelmTemplateTest, FailureCarriesHelmsMessage) {
  HelmValues values;
  values.set = {"novalue"};
  RenderedChart rendered;
  Status s = helm_.Template(chart_, HelmRelease(), values, &rendered);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--set novalue"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("exit code"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find(R"(key "novalue" has no value)"), std::string::npos) << s.ToString();

  WriteRaw(chart_ + "/templates/broken.yaml", "x: {{ .Values.a }\n");
  s = helm_.Template(chart_, HelmRelease(), HelmValues(), &rendered);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("broken.yaml:1"), std::string::npos) << s.ToString();
  std::string report;
  s = helm_.Lint(chart_, HelmValues(), &report);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(report.find("[ERROR]"), std::string::npos) << report;
  EXPECT_NE(s.message().find("broken.yaml:1"), std::string::npos) << s.ToString();
}

TEST_F(HelmTemplateTest, LintReportsOnSuccess) {
  std::string report;
  const Status s = helm_.Lint(chart_, HelmValues(), &report);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_NE(report.find("[INFO] Chart.yaml: icon is recommended"), std::string::npos) << report;
}

TEST(HelmTemplateMissingBinaryTest, IsAnErrorNamingIt) {
  HelmTemplate helm("/nonexistent/helm-template");
  RenderedChart rendered;
  const Status s = helm.Template(".", HelmRelease(), HelmValues(), &rendered);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/nonexistent/helm-template"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace gaptrain
