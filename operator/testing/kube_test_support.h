// Helpers for the client's tests: certificates made with the openssl
// command, the kube-apiserver recordings in ../shared/k8s/recorded, and
// list and watch replies for the ScriptedServer.

#ifndef GAPTRAIN_OPERATOR_TESTING_KUBE_TEST_SUPPORT_H_
#define GAPTRAIN_OPERATOR_TESTING_KUBE_TEST_SUPPORT_H_


#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "operator/testing/scripted_server.h"
#include "services/base/status.h"

namespace gaptrain {
namespace kube {

// A CA, a server certificate for 127.0.0.1 and localhost signed by it, a
// client certificate (CN gaptrain-operator) signed by it, and a second,
// unrelated CA. *_file are paths in the directory; *_pem their contents.
struct TestCertificates {
  std::string ca_file, ca_pem;
  std::string server_cert_file, server_key_file;
  std::string client_cert_file, client_cert_pem;
  std::string client_key_file, client_key_pem;
  std::string other_ca_file, other_ca_pem;
};

// Runs `openssl` (EC P-256 keys, valid for two days) in `dir`. The error
// holds openssl's output.
Status MakeTestCertificates(const std::string& dir, TestCertificates* out);

// One recorded exchange (recorded/NAME.json).
struct Recording {
  std::string method;
  std::string path;                          // before '?'
  std::map<std::string, std::string> query;  // decoded
  std::map<std::string, std::string> request_headers;
  nlohmann::json request_body;  // JSON, or a string for a YAML body, or null
  int status = 0;
  std::map<std::string, std::string> response_headers;
  nlohmann::json response_body;
  // The response body as the server would send it.
  std::string ResponseBytes() const;
};

Status LoadRecording(const std::string& name, Recording* out);

// The bytes of recorded/NAME (e.g. "watch-trainingjobs.http").
Status ReadRecordedFile(const std::string& name, std::string* out);

// A list response: {kind, apiVersion, metadata.resourceVersion, items}.
ScriptedReply ListReply(const std::string& kind, const std::string& api_version,
                        const std::vector<nlohmann::json>& items,
                        const std::string& resource_version);

// A watch response (HTTP/1.1, chunked) carrying `events`, one JSON watch
// event per chunk, as kube-apiserver sends them. With `end` the response
// is complete (the server ended the watch); without, the connection stays
// open after the events until the client leaves.
ScriptedReply WatchReply(const std::vector<std::string>& events, bool end);

}  // namespace kube
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_KUBE_TEST_SUPPORT_H_
