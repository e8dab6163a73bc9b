// Tests the client over TLS against the scripted server with certificates
// made by the openssl command: the server is verified against the CA and
// its name (IP or DNS, with SNI for names), a wrong CA or name fails
// clearly, insecure-skip-tls-verify skips the checks, the client
// certificate is presented when configured, and the bearer token (from a
// file that rotates) is sent.

#include <gtest/gtest.h>
#include <stdio.h>
#include <sys/stat.h>

#include <cstdlib>
#include <string>

#include "operator/kube/client.h"
#include "operator/testing/scripted_server.h"
#include "operator/testing/kube_test_support.h"
#include "services/base/file_contents.h"
#include "services/testing/test_files.h"

namespace gaptrain {
namespace kube {
namespace {

using Code = Status::Code;

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* tmp = std::getenv("TEST_TMPDIR");
    const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/tls_test_certs";
    ::mkdir(dir.c_str(), 0755);
    certs_ = new TestCertificates();
    Status s = MakeTestCertificates(dir, certs_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  static void TearDownTestSuite() { delete certs_; }

  void StartServer(bool require_client_certificate) {
    ScriptedServer::Options options;
    options.cert_file = certs_->server_cert_file;
    options.key_file = certs_->server_key_file;
    if (require_client_certificate) options.client_ca_file = certs_->ca_file;
    Status s = ScriptedServer::Start(options, &server_);
    ASSERT_TRUE(s.ok()) << s.ToString();
    server_->SetHandler([](const ReceivedRequest&) { return ScriptedReply(); });
  }

  ClusterConfig Config(const std::string& host = "127.0.0.1") {
    ClusterConfig c;
    c.server = "https://" + host + ":" + std::to_string(server_->port());
    c.ca_pem = certs_->ca_pem;
    c.source = "test config";
    return c;
  }

  Status Get(const ClusterConfig& config) {
    std::unique_ptr<Client> client;
    ClientOptions options;
    options.request_timeout = std::chrono::milliseconds(5000);
    GAPTRAIN_RETURN_IF_ERROR(Client::New(config, options, &client));
    return client->Get(kPods, "default", "p", nullptr);
  }

  static TestCertificates* certs_;
  std::unique_ptr<ScriptedServer> server_;
};

TestCertificates* TlsTest::certs_ = nullptr;

TEST_F(TlsTest, VerifiesTheServerAgainstTheCaAndItsAddress) {
  StartServer(false);
  ClusterConfig config = Config();
  config.token = "secret-token";
  Status s = Get(config);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ReceivedRequest got = server_->requests().back();
  EXPECT_EQ(got.headers["authorization"], "Bearer secret-token");
  EXPECT_EQ(got.server_name, "") << "no SNI for an IP address";
  EXPECT_EQ(got.client_common_name, "");

  s = Get(Config("localhost"));
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(server_->requests().back().server_name, "localhost");
}

TEST_F(TlsTest, KeepsTlsConnectionsAlive) {
  StartServer(false);
  std::unique_ptr<Client> client;
  ASSERT_TRUE(Client::New(Config(), {}, &client).ok());
  for (int i = 0; i < 4; ++i) {
    Status s = client->Get(kPods, "default", "p", nullptr);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  EXPECT_EQ(server_->connections(), 1);
}

TEST_F(TlsTest, AWrongCaOrNameFailsClearly) {
  StartServer(false);
  ClusterConfig config = Config();
  config.ca_pem = certs_->other_ca_pem;
  Status s = Get(config);
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_NE(s.message().find("get pods default/p: TLS handshake with 127.0.0.1:" +
                             std::to_string(server_->port()) + ": certificate verify failed"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("(unable to get local issuer certificate)"), std::string::npos)
      << s.message();

  config = Config();
  config.tls_server_name = "kubernetes.default.svc";
  s = Get(config);
  EXPECT_NE(s.message().find("(hostname mismatch)"), std::string::npos) << s.message();
  EXPECT_EQ(server_->requests().size(), 0u);

  // tls-server-name may also rescue a connection by IP to a named certificate.
  config.tls_server_name = "localhost";
  EXPECT_TRUE(Get(config).ok());
}

TEST_F(TlsTest, InsecureSkipTlsVerifyAcceptsAnyServer) {
  StartServer(false);
  ClusterConfig config = Config();
  config.ca_pem = certs_->other_ca_pem;
  config.insecure_skip_tls_verify = true;
  config.tls_server_name = "kubernetes.default.svc";
  Status s = Get(config);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST_F(TlsTest, PresentsTheClientCertificateWhenConfigured) {
  StartServer(true);
  ClusterConfig config = Config();
  Status s = Get(config);
  EXPECT_FALSE(s.ok()) << "the server requires a client certificate";
  EXPECT_EQ(server_->failed_handshakes(), 1);

  config.client_certificate_pem = certs_->client_cert_pem;
  config.client_key_pem = certs_->client_key_pem;
  s = Get(config);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(server_->requests().back().client_common_name, "gaptrain-operator");
}

TEST_F(TlsTest, BadTlsMaterialIsRefusedWhenTheClientIsMade) {
  StartServer(false);
  std::unique_ptr<Client> client;
  ClusterConfig config = Config();
  config.ca_pem = "garbage";
  Status s = Client::New(config, {}, &client);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("test config: certificate authority: not a PEM certificate: ", 0), 0u)
      << s.message();

  config = Config();
  config.client_certificate_pem = certs_->client_cert_pem;
  s = Client::New(config, {}, &client);
  EXPECT_EQ(s.message(), "test config: client certificate: needs both a certificate and a key");

  std::string server_key;
  ASSERT_TRUE(ReadFile(certs_->server_key_file, &server_key).ok());
  config.client_key_pem = server_key;
  s = Client::New(config, {}, &client);
  EXPECT_EQ(s.message(),
            "test config: client key: does not match the client certificate (key values "
            "mismatch)");
}

TEST_F(TlsTest, TheTokenFileIsReadAgainAfterItRotates) {
  StartServer(false);
  const std::string dir = TestDir("tls_token");
  const std::string token_file = dir + "/token";
  WriteRaw(token_file, "token-1\n");
  ClusterConfig config = Config();
  config.token = "inline-is-ignored";
  config.token_file = token_file;
  std::unique_ptr<Client> client;
  ASSERT_TRUE(Client::New(config, {}, &client).ok());
  ASSERT_TRUE(client->Get(kPods, "default", "p", nullptr).ok());
  EXPECT_EQ(server_->requests().back().headers["authorization"], "Bearer token-1");

  WriteRaw(token_file + ".next", "token-2-rotated\n");
  ASSERT_EQ(::rename((token_file + ".next").c_str(), token_file.c_str()), 0);
  ASSERT_TRUE(client->Get(kPods, "default", "p", nullptr).ok());
  EXPECT_EQ(server_->requests().back().headers["authorization"], "Bearer token-2-rotated");

  ::unlink(token_file.c_str());
  Status s = client->Get(kPods, "default", "p", nullptr);
  EXPECT_EQ(s.code(), Code::kUnauthenticated);
  EXPECT_EQ(s.message(), "get pods default/p: token file " + token_file +
                             ": No such file or directory");
}

}  // namespace
}  // namespace kube
}  // namespace gaptrain
