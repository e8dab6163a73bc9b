// Helpers for the client's tests: certificates made with the openssl
// command, and the kube-apiserver recordings in ../shared/k8s/recorded.

#ifndef GAPTRAIN_OPERATOR_TESTING_KUBE_TEST_SUPPORT_H_
#define GAPTRAIN_OPERATOR_TESTING_KUBE_TEST_SUPPORT_H_

#include <yaml-cpp/yaml.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "services/common/status.h"

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

// A YAML document (a recorded request body) as JSON: quoted scalars stay
// strings, plain ones become booleans or integers where they look like them.
nlohmann::json YamlToJson(const YAML::Node& node);

// The bytes of recorded/NAME (e.g. "watch-trainingjobs.http").
Status ReadRecordedFile(const std::string& name, std::string* out);

}  // namespace kube
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_KUBE_TEST_SUPPORT_H_
