#include "tests/s3_test_server.h"

#include <stdio.h>
#include <unistd.h>

#include <cstdlib>

#include "operator/envtest/free_port.h"
#include "services/testing/test_files.h"

namespace gaptrain {
namespace {

constexpr char kKeyId[] = "gaptrain-test";
constexpr char kSecret[] = "not-a-secret";

std::string ShellOutput(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  ::pclose(pipe);
  return out;
}

}  // namespace

std::string S3TestServer::Binary() {
  const char* rclone = std::getenv("GAPTRAIN_RCLONE");
  return rclone != nullptr && ::access(rclone, X_OK) == 0 ? rclone : "";
}

Status S3TestServer::Create(const std::string& root, const std::string& log_file,
                            const std::string& address) {
  spec_.binary = Binary();
  if (spec_.binary.empty()) return Status::FailedPrecondition(kNoS3Server);
  uint16_t port = 0;
  GAPTRAIN_RETURN_IF_ERROR(envtest::FreePort(address != "127.0.0.1", &port));
  endpoint_ = address + ":" + std::to_string(port);
  spec_.args = {"serve", "s3", "--addr", endpoint_, "--auth-key",
                std::string(kKeyId) + "," + kSecret, "--config", "/dev/null", root};
  spec_.log_file = log_file;
  return Start();
}

Status S3TestServer::Start() { return Process::Start(spec_, &server_); }

nlohmann::json S3TestServer::Env() const {
  return nlohmann::json::array({{{"name", "AWS_ENDPOINT_URL"}, {"value", "http://" + endpoint_}},
                                {{"name", "AWS_ACCESS_KEY_ID"}, {"value", kKeyId}},
                                {{"name", "AWS_SECRET_ACCESS_KEY"}, {"value", kSecret}},
                                {{"name", "AWS_DEFAULT_REGION"}, {"value", "us-east-1"}}});
}

std::string S3TestServer::ShellEnv() const {
  return "AWS_ENDPOINT_URL=http://" + endpoint_ + " AWS_ACCESS_KEY_ID=" + kKeyId +
         " AWS_SECRET_ACCESS_KEY=" + kSecret + " AWS_DEFAULT_REGION=us-east-1 ";
}

Status S3TestServer::AwaitAnswer(const std::string& probe, const std::string& expected) const {
  std::string out;
  for (int attempt = 0; attempt < 50; ++attempt) {
    out = ShellOutput(ShellEnv() + probe);
    if (out.find(expected) != std::string::npos) return Status::OK();
    if (!Running()) break;
  }
  return Status::Unavailable("the S3 server did not answer '" + probe + "' with '" + expected +
                             "'; last: " + out + "\nits log: " + ReadRaw(spec_.log_file));
}

}  // namespace gaptrain
