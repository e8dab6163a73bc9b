// Tests the kubeconfig loader (data and file forms, relative paths,
// contexts, merging, refusals), the in-cluster config, the resolution order
// and the token file that is read again when it changes.

#include "operator/kube/cluster_config.h"

#include <gtest/gtest.h>
#include <stdio.h>
#include <sys/stat.h>

#include <string>

#include "operator/kube/bearer_token.h"
#include "operator/kube/kubeconfig.h"
#include "operator/testing/kube_test_support.h"
#include "services/testing/test_files.h"

namespace gaptrain {
namespace kube {
namespace {

using Code = Status::Code;

std::string EncodeBase64(const std::string& in) {
  static const char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < in.size(); i += 3) {
    uint32_t n = static_cast<unsigned char>(in[i]) << 16;
    if (i + 1 < in.size()) n |= static_cast<unsigned char>(in[i + 1]) << 8;
    if (i + 2 < in.size()) n |= static_cast<unsigned char>(in[i + 2]);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < in.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += i + 2 < in.size() ? kAlphabet[n & 63] : '=';
  }
  return out;
}

class ClusterConfigTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* tmp = std::getenv("TEST_TMPDIR");
    const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/cluster_config_certs";
    ::mkdir(dir.c_str(), 0755);
    certs_ = new TestCertificates();
    Status s = MakeTestCertificates(dir, certs_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  static void TearDownTestSuite() { delete certs_; }

  void SetUp() override { dir_ = TestDir("kubeconfig"); }

  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    WriteRaw(path, text);
    return path;
  }

  // A kubeconfig with one cluster (data form CA), one user and two contexts.
  std::string DataFormKubeconfig(const std::string& user_extra = "") {
    return "apiVersion: v1\nkind: Config\ncurrent-context: dev\n"
           "clusters:\n"
           "- name: kind\n"
           "  cluster:\n"
           "    server: https://127.0.0.1:6443\n"
           "    certificate-authority-data: " + EncodeBase64(certs_->ca_pem) + "\n"
           "users:\n"
           "- name: admin\n"
           "  user:\n"
           "    client-certificate-data: " + EncodeBase64(certs_->client_cert_pem) + "\n"
           "    client-key-data: " + EncodeBase64(certs_->client_key_pem) + "\n" + user_extra +
           "- name: robot\n"
           "  user:\n"
           "    token: abc123\n"
           "contexts:\n"
           "- name: dev\n"
           "  context: {cluster: kind, user: admin, namespace: training}\n"
           "- name: ci\n"
           "  context: {cluster: kind, user: robot}\n";
  }

  static TestCertificates* certs_;
  std::string dir_;
};

TestCertificates* ClusterConfigTest::certs_ = nullptr;

TEST_F(ClusterConfigTest, DataFormsAndTheCurrentContext) {
  const std::string path = Write("config", DataFormKubeconfig());
  ClusterConfig c;
  Status s = LoadKubeconfig({path}, "", &c);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(c.server, "https://127.0.0.1:6443");
  EXPECT_EQ(c.ca_pem, certs_->ca_pem);
  EXPECT_EQ(c.client_certificate_pem, certs_->client_cert_pem);
  EXPECT_EQ(c.client_key_pem, certs_->client_key_pem);
  EXPECT_EQ(c.token, "");
  EXPECT_EQ(c.default_namespace, "training");
  EXPECT_FALSE(c.insecure_skip_tls_verify);
  EXPECT_EQ(c.source, "kubeconfig " + path + ", context dev");
}

TEST_F(ClusterConfigTest, AnExplicitContextWinsOverCurrentContext) {
  const std::string path = Write("config", DataFormKubeconfig());
  ClusterConfig c;
  ASSERT_TRUE(LoadKubeconfig({path}, "ci", &c).ok());
  EXPECT_EQ(c.token, "abc123");
  EXPECT_EQ(c.client_certificate_pem, "");
  EXPECT_EQ(c.default_namespace, "default");
}

TEST_F(ClusterConfigTest, FileFormsAreRelativeToTheKubeconfig) {
  ::mkdir((dir_ + "/pki").c_str(), 0755);
  WriteRaw(dir_ + "/pki/ca.crt", certs_->ca_pem);
  WriteRaw(dir_ + "/pki/client.crt", certs_->client_cert_pem);
  WriteRaw(dir_ + "/pki/client.key", certs_->client_key_pem);
  WriteRaw(dir_ + "/token", "tok-from-file\n");
  const std::string path = Write(
      "config",
      "current-context: c\n"
      "clusters: [{name: k, cluster: {server: 'https://[::1]:6443', certificate-authority: pki/ca.crt}}]\n"
      "users:\n"
      "- name: u\n"
      "  user: {client-certificate: pki/client.crt, client-key: " + dir_ + "/pki/client.key, tokenFile: token}\n"
      "contexts: [{name: c, context: {cluster: k, user: u}}]\n");
  ClusterConfig c;
  Status s = LoadKubeconfig({path}, "", &c);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(c.server, "https://[::1]:6443");
  EXPECT_EQ(c.ca_pem, certs_->ca_pem);
  EXPECT_EQ(c.client_certificate_pem, certs_->client_cert_pem);
  EXPECT_EQ(c.client_key_pem, certs_->client_key_pem);
  EXPECT_EQ(c.token_file, dir_ + "/token");
}

TEST_F(ClusterConfigTest, MissingEntriesAreNamed) {
  const std::string path = Write("config", DataFormKubeconfig());
  ClusterConfig c;
  Status s = LoadKubeconfig({path}, "prod", &c);
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_EQ(s.message(), "kubeconfig " + path + ": context \"prod\" not found (contexts: ci, dev)");

  const std::string no_cluster = Write(
      "no-cluster", "current-context: c\ncontexts: [{name: c, context: {cluster: gone, user: u}}]\n");
  s = LoadKubeconfig({no_cluster}, "", &c);
  EXPECT_EQ(s.message(), "kubeconfig " + no_cluster +
                             ": contexts[0].context.cluster: cluster \"gone\" not found (clusters: "
                             "none defined)");

  const std::string no_user = Write(
      "no-user",
      "current-context: c\nclusters: [{name: k, cluster: {server: 'http://127.0.0.1:8080'}}]\n"
      "contexts: [{name: c, context: {cluster: k, user: nobody}}]\n");
  s = LoadKubeconfig({no_user}, "", &c);
  EXPECT_EQ(s.message(), "kubeconfig " + no_user +
                             ": contexts[0].context.user: user \"nobody\" not found (users: none "
                             "defined)");

  const std::string no_current = Write("no-current", "clusters: []\n");
  s = LoadKubeconfig({no_current}, "", &c);
  EXPECT_EQ(s.message(), "kubeconfig " + no_current +
                             ": current-context is not set and no context was given (contexts: "
                             "none defined)");
}

TEST_F(ClusterConfigTest, UnsupportedAuthenticationIsRefusedByName) {
  const std::string exec = Write("exec", DataFormKubeconfig(
                                             "    exec:\n"
                                             "      apiVersion: client.authentication.k8s.io/v1\n"
                                             "      command: aws\n"));
  ClusterConfig c;
  Status s = LoadKubeconfig({exec}, "", &c);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "kubeconfig " + exec +
                             ": users[0].user.exec: exec credential plugins are not supported; use "
                             "a token, tokenFile or client certificate");
  const std::string provider =
      Write("provider", DataFormKubeconfig("    auth-provider: {name: gcp}\n"));
  s = LoadKubeconfig({provider}, "", &c);
  EXPECT_EQ(s.message(), "kubeconfig " + provider +
                             ": users[0].user.auth-provider: auth providers are not supported; use "
                             "a token, tokenFile or client certificate");
  const std::string basic = Write("basic", DataFormKubeconfig("    username: admin\n"));
  s = LoadKubeconfig({basic}, "", &c);
  EXPECT_EQ(s.message(),
            "kubeconfig " + basic + ": users[0].user.username: basic authentication is not supported");
}

TEST_F(ClusterConfigTest, BadValuesNameTheFileAndField) {
  std::string text = DataFormKubeconfig();
  text.replace(text.find("client-key-data: ") + 17, 4, "ab$%");
  const std::string bad_base64 = Write("bad-base64", text);
  ClusterConfig c;
  Status s = LoadKubeconfig({bad_base64}, "", &c);
  EXPECT_EQ(s.message(),
            "kubeconfig " + bad_base64 + ": users[0].user.client-key-data: not valid base64");

  text = DataFormKubeconfig();
  const size_t ca = text.find("certificate-authority-data: ") + 28;
  text.replace(ca, text.find('\n', ca) - ca, EncodeBase64("not a certificate"));
  const std::string bad_pem = Write("bad-pem", text);
  s = LoadKubeconfig({bad_pem}, "", &c);
  EXPECT_EQ(s.message().rfind("kubeconfig " + bad_pem +
                                  ": clusters[0].cluster.certificate-authority-data: not a PEM "
                                  "certificate: ",
                              0),
            0u)
      << s.message();

  const std::string missing_file = Write(
      "missing-file",
      "current-context: c\nclusters: [{name: k, cluster: {server: 'https://k:6443'}}]\n"
      "users: [{name: u, user: {client-certificate: nope.crt, client-key: nope.key}}]\n"
      "contexts: [{name: c, context: {cluster: k, user: u}}]\n");
  s = LoadKubeconfig({missing_file}, "", &c);
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_EQ(s.message(), "kubeconfig " + missing_file + ": users[0].user.client-certificate: " +
                             dir_ + "/nope.crt: cannot read: No such file or directory");

  const std::string insecure_and_ca = Write(
      "insecure",
      "current-context: c\nclusters: [{name: k, cluster: {server: 'https://k:6443', "
      "insecure-skip-tls-verify: true, certificate-authority-data: " +
          EncodeBase64(certs_->ca_pem) + "}}]\ncontexts: [{name: c, context: {cluster: k}}]\n");
  s = LoadKubeconfig({insecure_and_ca}, "", &c);
  EXPECT_EQ(s.message(), "kubeconfig " + insecure_and_ca +
                             ": clusters[0].cluster.insecure-skip-tls-verify: cannot be combined "
                             "with clusters[0].cluster.certificate-authority-data");

  const std::string bad_url = Write(
      "bad-url", "current-context: c\nclusters: [{name: k, cluster: {server: 'ftp://k'}}]\n"
                 "contexts: [{name: c, context: {cluster: k}}]\n");
  s = LoadKubeconfig({bad_url}, "", &c);
  EXPECT_EQ(s.message(), "kubeconfig " + bad_url +
                             ": clusters[0].cluster.server: server URL 'ftp://k': must start with "
                             "https:// or http://");

  const std::string no_name = Write("no-name", "clusters: [{cluster: {server: 'http://k'}}]\n");
  s = LoadKubeconfig({no_name}, "", &c);
  EXPECT_EQ(s.message(), "kubeconfig " + no_name + ": clusters[0].name: is required");

  const std::string not_yaml = Write("not-yaml", "clusters: [unclosed\n");
  s = LoadKubeconfig({not_yaml}, "", &c);
  EXPECT_EQ(s.message().rfind("kubeconfig " + not_yaml + ": not valid YAML: ", 0), 0u)
      << s.message();
  const std::string list = Write("list", "- a\n- b\n");
  s = LoadKubeconfig({list}, "", &c);
  EXPECT_EQ(s.message(), "kubeconfig " + list + ": must be a YAML mapping");
  s = LoadKubeconfig({dir_ + "/absent"}, "", &c);
  EXPECT_EQ(s.message(),
            "kubeconfig " + dir_ + "/absent: cannot read: No such file or directory");
}

TEST_F(ClusterConfigTest, SeveralFilesMergeAsKubectlDoes) {
  ::mkdir((dir_ + "/a").c_str(), 0755);
  ::mkdir((dir_ + "/b").c_str(), 0755);
  WriteRaw(dir_ + "/b/ca.crt", certs_->ca_pem);
  const std::string first = Write(
      "a/config",
      "current-context: from-a\n"
      "users: [{name: u, user: {token: token-a}}]\n"
      "contexts: [{name: from-a, context: {cluster: shared, user: u, namespace: ns-a}}]\n");
  const std::string second = Write(
      "b/config",
      "current-context: from-b\n"
      "clusters: [{name: shared, cluster: {server: 'https://b:6443', certificate-authority: ca.crt}}]\n"
      "users: [{name: u, user: {token: token-b}}]\n"
      "contexts: [{name: from-a, context: {cluster: nothing}}]\n");
  ClusterConfig c;
  Status s = LoadKubeconfig(SplitKubeconfigList(first + "::" + second + ":" + first), "", &c);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(c.server, "https://b:6443");
  EXPECT_EQ(c.ca_pem, certs_->ca_pem) << "relative to b/, where the cluster is defined";
  EXPECT_EQ(c.token, "token-a") << "the first file defining a name wins";
  EXPECT_EQ(c.default_namespace, "ns-a");
  EXPECT_EQ(c.source, "kubeconfig " + first + ":" + second + ", context from-a");
}

TEST_F(ClusterConfigTest, InClusterConfig) {
  const std::string sa = dir_ + "/serviceaccount";
  ::mkdir(sa.c_str(), 0755);
  WriteRaw(sa + "/ca.crt", certs_->ca_pem);
  WriteRaw(sa + "/token", "sa-token");
  WriteRaw(sa + "/namespace", "gaptrain-system\n");
  Environment env = {{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"}};
  ClusterConfig c;
  Status s = LoadInClusterConfig(sa, env, &c);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(c.server, "https://10.96.0.1:443");
  EXPECT_EQ(c.ca_pem, certs_->ca_pem);
  EXPECT_EQ(c.token_file, sa + "/token");
  EXPECT_EQ(c.default_namespace, "gaptrain-system");

  env["KUBERNETES_SERVICE_HOST"] = "fd00:10:96::1";
  env["POD_NAMESPACE"] = "from-env";
  ASSERT_TRUE(LoadInClusterConfig(sa, env, &c).ok());
  EXPECT_EQ(c.server, "https://[fd00:10:96::1]:443");
  EXPECT_EQ(c.default_namespace, "from-env");
  ServerUrl url;
  ASSERT_TRUE(ParseServerUrl(c.server, &url).ok());
  EXPECT_EQ(url.host, "fd00:10:96::1");

  s = LoadInClusterConfig(sa, {}, &c);
  EXPECT_EQ(s.code(), Code::kNotFound);
  s = LoadInClusterConfig(dir_ + "/nowhere", env, &c);
  EXPECT_EQ(s.message(), "in-cluster config: " + dir_ +
                             "/nowhere/ca.crt: cannot read: No such file or directory");
}

TEST_F(ClusterConfigTest, ResolutionOrder) {
  const std::string sa = dir_ + "/serviceaccount";
  ::mkdir(sa.c_str(), 0755);
  WriteRaw(sa + "/ca.crt", certs_->ca_pem);
  WriteRaw(sa + "/token", "sa-token");
  auto kubeconfig = [&](const std::string& name, const std::string& server) {
    return Write(name, "current-context: c\nclusters: [{name: k, cluster: {server: '" + server +
                           "'}}]\ncontexts: [{name: c, context: {cluster: k}}]\n");
  };
  const std::string flag = kubeconfig("flag", "http://flag:1");
  const std::string env_file = kubeconfig("env", "http://env:1");
  ::mkdir((dir_ + "/home").c_str(), 0755);
  ::mkdir((dir_ + "/home/.kube").c_str(), 0755);
  kubeconfig("home/.kube/config", "http://home:1");

  ResolveOptions options;
  options.service_account_dir = sa;
  options.env = {{"KUBECONFIG", dir_ + "/missing:" + env_file},
                 {"HOME", dir_ + "/home"},
                 {"KUBERNETES_SERVICE_HOST", "10.0.0.1"},
                 {"KUBERNETES_SERVICE_PORT", "443"}};
  options.kubeconfig = flag;
  ClusterConfig c;
  ASSERT_TRUE(ResolveClusterConfig(options, &c).ok());
  EXPECT_EQ(c.server, "http://flag:1");

  options.kubeconfig = "";
  ASSERT_TRUE(ResolveClusterConfig(options, &c).ok());
  EXPECT_EQ(c.server, "http://env:1");

  options.env.erase("KUBECONFIG");
  ASSERT_TRUE(ResolveClusterConfig(options, &c).ok());
  EXPECT_EQ(c.server, "http://home:1");

  options.env["HOME"] = dir_ + "/empty-home";
  ASSERT_TRUE(ResolveClusterConfig(options, &c).ok());
  EXPECT_EQ(c.server, "https://10.0.0.1:443");

  // A set KUBECONFIG replaces ~/.kube/config, even when its files are missing.
  options.env["HOME"] = dir_ + "/home";
  options.env["KUBECONFIG"] = dir_ + "/missing";
  ASSERT_TRUE(ResolveClusterConfig(options, &c).ok());
  EXPECT_EQ(c.server, "https://10.0.0.1:443");

  options.env.erase("KUBERNETES_SERVICE_HOST");
  Status s = ResolveClusterConfig(options, &c);
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_EQ(s.message(), "no Kubernetes configuration: tried KUBECONFIG=" + dir_ +
                             "/missing (no such files); in-cluster (KUBERNETES_SERVICE_HOST and "
                             "KUBERNETES_SERVICE_PORT are not both set); pass --kubeconfig");

  options.kubeconfig = dir_ + "/absent";
  s = ResolveClusterConfig(options, &c);
  EXPECT_EQ(s.code(), Code::kNotFound) << "an explicit kubeconfig must load";
}

TEST_F(ClusterConfigTest, TheTokenFileIsReadAgainWhenItChanges) {
  const std::string path = dir_ + "/token";
  WriteRaw(path, "first-token\n");
  BearerToken token("inline-ignored", path);
  std::string value;
  ASSERT_TRUE(token.Current(&value).ok());
  EXPECT_EQ(value, "first-token");

  // The kubelet replaces the file (a new inode), as here.
  WriteRaw(path + ".new", "second-token");
  ASSERT_EQ(::rename((path + ".new").c_str(), path.c_str()), 0);
  ASSERT_TRUE(token.Current(&value).ok());
  EXPECT_EQ(value, "second-token");

  // Rewritten in place with a different length.
  WriteRaw(path, "third");
  ASSERT_TRUE(token.Current(&value).ok());
  EXPECT_EQ(value, "third");

  WriteRaw(path, " \n");
  Status s = token.Current(&value);
  EXPECT_EQ(s.code(), Code::kUnauthenticated);
  EXPECT_EQ(s.message(), "token file " + path + " is empty");
  ::unlink(path.c_str());
  s = token.Current(&value);
  EXPECT_EQ(s.message(), "token file " + path + ": No such file or directory");

  BearerToken inline_only("abc", "");
  ASSERT_TRUE(inline_only.Current(&value).ok());
  EXPECT_EQ(value, "abc");
}

TEST(ServerUrlTest, ParsesWhatKubeconfigsHold) {
  ServerUrl u;
  ASSERT_TRUE(ParseServerUrl("https://10.0.0.1", &u).ok());
  EXPECT_TRUE(u.tls);
  EXPECT_EQ(u.port, 443);
  EXPECT_EQ(u.HostPort(), "10.0.0.1:443");
  ASSERT_TRUE(ParseServerUrl("http://localhost:8080/", &u).ok());
  EXPECT_FALSE(u.tls);
  EXPECT_EQ(u.host, "localhost");
  EXPECT_EQ(u.port, 8080);
  EXPECT_EQ(u.base_path, "");
  ASSERT_TRUE(ParseServerUrl("https://[::1]:6443/k8s/clusters/c1/", &u).ok());
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.HostPort(), "[::1]:6443");
  EXPECT_EQ(u.base_path, "/k8s/clusters/c1");
  for (const char* bad : {"10.0.0.1:443", "https://", "https://h:0", "https://h:99999",
                          "https://h:x", "https://::1:443", "https://[::1", "https://h?x=1",
                          "https://user@h", "https://h:"}) {
    EXPECT_EQ(ParseServerUrl(bad, &u).code(), Code::kInvalidArgument) << bad;
  }
}

TEST(Base64Test, StrictStandardAlphabetWithPadding) {
  std::string out;
  ASSERT_TRUE(DecodeBase64("aGVsbG8=", &out));
  EXPECT_EQ(out, "hello");
  ASSERT_TRUE(DecodeBase64("aGVs\nbG8h", &out));
  EXPECT_EQ(out, "hello!");
  ASSERT_TRUE(DecodeBase64("", &out));
  EXPECT_EQ(out, "");
  for (const char* bad : {"aGVsbG8", "aGV=bG8=", "a===", "aGVsbG8-", "aGVsbG8=aaaa", "!!!!"}) {
    EXPECT_FALSE(DecodeBase64(bad, &out)) << bad;
  }
}

}  // namespace
}  // namespace kube
}  // namespace gaptrain
