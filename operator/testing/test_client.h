// Clients for the fake API server's own tests, independent of its code:
// TestClient sends requests over one keep-alive connection
// (services/common/http_client.h, Beast's parser) and decodes JSON bodies;
// WatchReader reads a watch response as it streams, chunk by chunk, and
// keeps every byte for checks of the framing. Every read has a deadline, so
// a silent server fails a test instead of hanging it.

#ifndef GAPTRAIN_OPERATOR_TESTING_TEST_CLIENT_H_
#define GAPTRAIN_OPERATOR_TESTING_TEST_CLIENT_H_

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "services/common/http_client.h"
#include "services/common/status.h"

namespace gaptrain {
namespace kube_testing {

struct TestResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  nlohmann::json json;  // the body parsed; null when it is not JSON

  std::string Header(const std::string& name) const;
};

class TestClient {
 public:
  // `token` is sent as a bearer token unless empty.
  TestClient(uint16_t port, std::string token);

  // Sends a request; a transport failure fails the running test and comes
  // back as status 0.
  TestResponse Send(const std::string& method, const std::string& target,
                    const std::string& body = "",
                    const std::string& content_type = "application/json",
                    const std::vector<std::pair<std::string, std::string>>& headers = {});
  TestResponse Get(const std::string& target) { return Send("GET", target); }
  TestResponse Post(const std::string& target, const nlohmann::json& body) {
    return Send("POST", target, body.dump());
  }
  TestResponse Put(const std::string& target, const nlohmann::json& body) {
    return Send("PUT", target, body.dump());
  }
  TestResponse MergePatch(const std::string& target, const nlohmann::json& patch) {
    return Send("PATCH", target, patch.dump(), "application/merge-patch+json");
  }
  TestResponse Apply(const std::string& target, const std::string& yaml) {
    return Send("PATCH", target, yaml, "application/apply-patch+yaml");
  }
  TestResponse Delete(const std::string& target, const std::string& body = "") {
    return Send("DELETE", target, body);
  }

 private:
  uint16_t port_;
  std::string token_;
  std::unique_ptr<HttpConnection> connection_;
};

class WatchReader {
 public:
  // Sends GET `target` (with "Connection: close") and reads the response
  // head within `timeout`.
  static Status Open(uint16_t port, const std::string& token, const std::string& target,
                     std::chrono::milliseconds timeout, std::unique_ptr<WatchReader>* out);
  ~WatchReader();

  int status() const { return status_; }
  std::string Header(const std::string& name) const;
  // The next event; DEADLINE_EXCEEDED when none arrives within `timeout`,
  // OUT_OF_RANGE once the stream has ended (the last chunk, or the server
  // closed the connection).
  Status Next(std::chrono::milliseconds timeout, nlohmann::json* event);
  // Reads until the stream ends; the events that were still to come.
  Status ReadToEnd(std::chrono::milliseconds timeout, std::vector<nlohmann::json>* events);
  // Every byte received so far, head included.
  const std::string& raw() const { return raw_; }
  // True when the stream ended with the terminating chunk (not a reset).
  bool ended_cleanly() const { return ended_cleanly_; }

 private:
  explicit WatchReader(int fd) : fd_(fd) {}
  // Reads more bytes before `deadline`; false on end of stream.
  Status Fill(std::chrono::steady_clock::time_point deadline, bool* eof);

  int fd_;
  int status_ = 0;
  std::map<std::string, std::string> headers_;
  std::string raw_;
  std::string pending_;  // received, not yet parsed (body part)
  std::string line_;     // an event's bytes so far
  bool ended_ = false;
  bool ended_cleanly_ = false;
};

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_TEST_CLIENT_H_
