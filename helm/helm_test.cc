// Helm (the real helm binary) on a chart of two templates written here:
// values apply in Helm's order, strings stay strings, a failure carries
// Helm's own message, and an install on a real API server creates what
// the chart renders and reports its notes (a dry run creates nothing).

#include "helm/helm.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "operator/envtest/api_resources.h"
#include "operator/envtest/shared_control_plane.h"
#include "services/testing/missing_requirement.h"
#include "services/testing/test_files.h"
#include "services/testing/test_processes.h"

namespace gaptrain {
namespace {

using nlohmann::json;

class HelmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const Status found = Helm::Find(&helm_);
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

  Helm helm_;
  std::string chart_;
};

TEST_F(HelmTest, ReleaseAndDefaults) {
  std::string manifests;
  const Status s = helm_.Template(chart_, HelmRelease{"r1", "ns1"}, HelmValues(), &manifests);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_NE(manifests.find("# Source: tiny/templates/configmap.yaml"), std::string::npos)
      << manifests;
  EXPECT_NE(manifests.find("  name: r1\n  namespace: ns1\n"), std::string::npos) << manifests;
  EXPECT_EQ(Data(manifests),
            json({{"a", "from-values-yaml"}, {"b", R"({"c":1,"d":2})"}, {"text", "plain"}}));
  EXPECT_EQ(manifests.find("Installed"), std::string::npos) << "NOTES.txt is not a manifest";
}

TEST_F(HelmTest, ValuesApplyInHelmsOrder) {
  const std::string file = TestDir("values") + "/values.yaml";
  WriteRaw(file, "a: from-file\nb: {c: 10}\ntext: from-file\n");
  HelmValues values;
  values.files = {file};
  values.overrides = {{"a", "from-overrides"}, {"text", "x,y={z}"}};
  values.set = {"b.d=20", "a=from-set"};
  values.set_string = {"a=from-set-string"};
  std::string manifests;
  const Status s = helm_.Template(chart_, HelmRelease(), values, &manifests);
  ASSERT_TRUE(s.ok()) << s.ToString();
  // Maps merge key by key; the overrides keep commas and braces as text.
  EXPECT_EQ(Data(manifests),
            json({{"a", "from-set-string"}, {"b", R"({"c":10,"d":20})"}, {"text", "x,y={z}"}}));
}

TEST_F(HelmTest, FailureCarriesHelmsMessage) {
  HelmValues values;
  values.set = {"novalue"};
  std::string manifests;
  Status s = helm_.Template(chart_, HelmRelease(), values, &manifests);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--set novalue"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("exit code"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find(R"(key "novalue" has no value)"), std::string::npos) << s.ToString();

  WriteRaw(chart_ + "/templates/broken.yaml", "x: {{ .Values.a }\n");
  s = helm_.Template(chart_, HelmRelease(), HelmValues(), &manifests);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("broken.yaml:1"), std::string::npos) << s.ToString();
  std::string report;
  s = helm_.Lint(chart_, HelmValues(), &report);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(report.find("[ERROR]"), std::string::npos) << report;
  EXPECT_NE(s.message().find("broken.yaml:1"), std::string::npos) << s.ToString();
}

TEST_F(HelmTest, LintReportsOnSuccess) {
  std::string report;
  const Status s = helm_.Lint(chart_, HelmValues(), &report);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_NE(report.find("[INFO] Chart.yaml: icon is recommended"), std::string::npos) << report;
}

// `helm install` on the real API server: the release's objects exist
// afterwards, and its notes are NOTES.txt rendered for that release; a dry
// run reports the same notes and creates nothing.
class HelmInstallTest : public HelmTest {
 protected:
  static void SetUpTestSuite() {
    envtest::ControlPlane::Options options;
    options.work_dir = TestTempDir("cluster");
    envtest::SharedControlPlane::Start(options);
  }
  static void TearDownTestSuite() { envtest::SharedControlPlane::Stop(); }
  void SetUp() override {
    HelmTest::SetUp();
    GAPTRAIN_REQUIRE_SHARED_CONTROL_PLANE();
    cluster_ = envtest::SharedControlPlane::Get();
  }
  envtest::ControlPlane* cluster_ = nullptr;
};

TEST_F(HelmInstallTest, DryRunRendersNotesAndCreatesNothing) {
  json release;
  const Status s = helm_.Install(chart_, HelmRelease{"dry", "helm-dry-run"}, HelmValues(),
                                 cluster_->admin_kubeconfig_file(), /*dry_run=*/true, &release);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(release["info"]["notes"], "Installed dry in helm-dry-run.\n") << release.dump(2);
  EXPECT_NE(release.value("manifest", "").find("name: dry\n"), std::string::npos)
      << release.dump(2);
  json object;
  const Status got = cluster_->admin()->Get(envtest::kNamespaces, "", "helm-dry-run", &object);
  EXPECT_EQ(got.code(), Status::Code::kNotFound) << got.ToString();
}

TEST_F(HelmInstallTest, InstallCreatesTheReleasesObjects) {
  HelmValues values;
  values.set = {"a=installed"};
  json release;
  const Status s = helm_.Install(chart_, HelmRelease{"real", "helm-install"}, values,
                                 cluster_->admin_kubeconfig_file(), /*dry_run=*/false, &release);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(release["info"]["status"], "deployed") << release.dump(2);
  EXPECT_EQ(release["info"]["notes"], "Installed real in helm-install.\n") << release.dump(2);
  json config_map;
  const Status got = cluster_->admin()->Get(kube::kConfigMaps, "helm-install", "real", &config_map);
  ASSERT_TRUE(got.ok()) << got.ToString();
  EXPECT_EQ(config_map["data"]["a"], "installed") << config_map.dump(2);
  EXPECT_EQ(config_map["metadata"]["labels"]["app.kubernetes.io/managed-by"], "Helm")
      << config_map.dump(2);
}

TEST(HelmMissingBinaryTest, IsAnErrorNamingIt) {
  Helm helm("/nonexistent/helm");
  std::string manifests;
  const Status s = helm.Template(".", HelmRelease(), HelmValues(), &manifests);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/nonexistent/helm"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace gaptrain
