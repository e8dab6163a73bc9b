#include "services/net/tls_credentials.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace gaptrain {
namespace {

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

TEST(TlsCredentialsTest, EmptyNamesMeanPlaintext) {
  std::shared_ptr<grpc::ServerCredentials> server;
  ASSERT_TRUE(ServerCredentialsFromFiles("", "", &server).ok());
  ASSERT_NE(server, nullptr);
  std::shared_ptr<grpc::ChannelCredentials> channel;
  ASSERT_TRUE(ChannelCredentialsFromCa("--master-ca", "", &channel).ok());
  ASSERT_NE(channel, nullptr);
}

TEST(TlsCredentialsTest, ErrorsNameTheFlagAndTheFile) {
  const std::string empty = TempDir() + "/empty.pem";
  std::ofstream(empty).flush();
  std::shared_ptr<grpc::ChannelCredentials> channel;
  Status s = ChannelCredentialsFromCa("--master-ca", "/nonexistent/ca.pem", &channel);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_EQ(s.message(),
            "--master-ca: /nonexistent/ca.pem: cannot read: No such file or directory");
  s = ChannelCredentialsFromCa("--coordinator-ca", empty, &channel);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "--coordinator-ca: " + empty + " is empty");

  const std::string key = TempDir() + "/key.pem";  // read, never parsed here
  std::ofstream(key) << "not really a key, but not empty\n";
  std::shared_ptr<grpc::ServerCredentials> server;
  s = ServerCredentialsFromFiles("/nonexistent/cert.pem", key, &server);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_EQ(s.message(),
            "--tls-cert: /nonexistent/cert.pem: cannot read: No such file or directory");
  s = ServerCredentialsFromFiles(key, "/nonexistent/key.pem", &server);
  EXPECT_EQ(s.message(), "--tls-key: /nonexistent/key.pem: cannot read: No such file or directory");
}

}  // namespace
}  // namespace gaptrain
