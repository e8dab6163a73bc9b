// S3TestServer: a real S3-compatible server for tests, rclone's `serve s3`
// (scripts/s3-server.sh builds rclone from the Go module proxy;
// $GAPTRAIN_RCLONE names it) over a directory whose folders are its
// buckets, on one port for its life, with a key pair: requests
// are signed as a real store's are.
//
// What callers may rely on:
//   - Create() starts it; Stop() and Start() take it away and bring it back
//     on the same port and files, as a store's outage; the destructor
//     stops it.
//   - Env() and ShellEnv() are what a boto3 client needs to reach it (the
//     endpoint, the keys, a region).
//   - AwaitAnswer() returns once a client's probe succeeds, so a test
//     starts its job against a server that answers.

#ifndef GAPTRAIN_TESTS_S3_TEST_SERVER_H_
#define GAPTRAIN_TESTS_S3_TEST_SERVER_H_

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "services/base/process.h"
#include "services/base/status.h"

namespace gaptrain {

// Why a test that needs the server cannot run here.
inline constexpr char kNoS3Server[] =
    "no S3 server: $GAPTRAIN_RCLONE names no rclone (scripts/s3-server.sh builds it; "
    "scripts/test.sh sets it)";

class S3TestServer {
 public:
  // $GAPTRAIN_RCLONE when it names an executable; "" otherwise (the test
  // skips, or fails in CI).
  static std::string Binary();

  // Serves `root`'s folders as buckets on `address` (loopback, or an
  // address pods reach, such as the test node's bridge), logging to
  // `log_file`.
  Status Create(const std::string& root, const std::string& log_file,
                const std::string& address = "127.0.0.1");
  Status Start();
  void Stop() { server_.reset(); }
  bool Running() const { return server_ != nullptr && server_->Running(); }
  const std::string& log_file() const { return spec_.log_file; }

  // A pod template's env for a client: AWS_ENDPOINT_URL, the keys, a region.
  nlohmann::json Env() const;
  // The same as a shell prefix ("AWS_ENDPOINT_URL=... ").
  std::string ShellEnv() const;

  // Runs the shell line `probe` with ShellEnv() until what it prints holds
  // `expected` (the server binds within a second of starting); an error
  // with the last output and the server's log otherwise.
  Status AwaitAnswer(const std::string& probe, const std::string& expected) const;

 private:
  std::string endpoint_;  // ADDRESS:PORT
  Process::Spec spec_;
  std::unique_ptr<Process> server_;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_TESTS_S3_TEST_SERVER_H_
