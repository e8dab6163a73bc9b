// ApiRequest and ApiResponse: one HTTP exchange with the fake API server,
// independent of the transport (FakeApiServer's connections build the
// request and write the response), plus the URL handling requests need.

#ifndef GAPTRAIN_OPERATOR_TESTING_API_REQUEST_H_
#define GAPTRAIN_OPERATOR_TESTING_API_REQUEST_H_

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "operator/testing/watch_session.h"

namespace gaptrain {
namespace kube_testing {

struct ApiRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and query: "/api/v1/pods?watch=1"
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;

  // The header's value, "" when absent; `name` in lower case.
  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
};

struct ApiResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // Warning, Retry-After, ...
  // Set for a watch: the response is 200 and streams the session's lines
  // in chunks; `body` is unused.
  std::unique_ptr<WatchSession> watch;
};

// "%2F" -> "/", "+" -> " " (query strings only).
std::string PercentDecode(const std::string& text, bool plus_is_space);

// The query string's parameters, decoded; a repeated key keeps its first
// value.
std::map<std::string, std::string> ParseQuery(const std::string& query);

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_API_REQUEST_H_
