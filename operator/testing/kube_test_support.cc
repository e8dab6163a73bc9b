#include "operator/testing/kube_test_support.h"

#include <cstdio>

#include "operator/envtest/test_certificates.h"
#include "operator/kube/cluster_config.h"
#include "operator/kube/json_text.h"
#include "operator/testing/scripted_server.h"
#include "services/base/file_contents.h"
#include "services/base/file_paths.h"
#include "services/testing/testdata_dir.h"

namespace gaptrain {
namespace kube {

Status MakeTestCertificates(const std::string& dir, TestCertificates* out) {
  GAPTRAIN_RETURN_IF_ERROR(envtest::MakeTestCa(dir, "ca"));
  GAPTRAIN_RETURN_IF_ERROR(envtest::MakeTestCa(dir, "other-ca"));
  GAPTRAIN_RETURN_IF_ERROR(envtest::MakeTestLeaf(dir, "server", "/CN=kube-apiserver",
                                                 "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                                 "extendedKeyUsage=serverAuth\n"));
  GAPTRAIN_RETURN_IF_ERROR(
      envtest::MakeTestLeaf(dir, "client", "/O=system:masters/CN=gaptrain-operator",
                            "extendedKeyUsage=clientAuth\n"));
  TestCertificates c;
  c.ca_file = dir + "/ca.crt";
  c.server_cert_file = dir + "/server.crt";
  c.server_key_file = dir + "/server.key";
  c.client_cert_file = dir + "/client.crt";
  c.client_key_file = dir + "/client.key";
  c.other_ca_file = dir + "/other-ca.crt";
  GAPTRAIN_RETURN_IF_ERROR(ReadFile(c.ca_file, &c.ca_pem));
  GAPTRAIN_RETURN_IF_ERROR(ReadFile(c.client_cert_file, &c.client_cert_pem));
  GAPTRAIN_RETURN_IF_ERROR(ReadFile(c.client_key_file, &c.client_key_pem));
  GAPTRAIN_RETURN_IF_ERROR(ReadFile(c.other_ca_file, &c.other_ca_pem));
  *out = std::move(c);
  return Status::OK();
}

Status ReadRecordedFile(const std::string& name, std::string* out) {
  std::string dir;
  GAPTRAIN_RETURN_IF_ERROR(FindRecordedK8sDir(&dir));
  return ReadFile(dir + "/" + name, out);
}

std::string Recording::ResponseBytes() const {
  return response_body.is_string() ? response_body.get<std::string>() : response_body.dump();
}

Status LoadRecording(const std::string& name, Recording* out) {
  std::string text;
  GAPTRAIN_RETURN_IF_ERROR(ReadRecordedFile(name + ".json", &text));
  nlohmann::json json;
  Status s = ParseJson(text, &json);
  if (!s.ok()) return Status(s.code(), name + ".json: " + s.message());
  try {
    const nlohmann::json& request = json.at("request");
    const nlohmann::json& response = json.at("response");
    Recording r;
    r.method = request.at("method").get<std::string>();
    const std::string path = request.at("path").get<std::string>();
    const size_t q = path.find('?');
    r.path = path.substr(0, q);
    if (q != std::string::npos) r.query = DecodeQuery(path.substr(q + 1));
    r.request_headers = request.value("headers", std::map<std::string, std::string>());
    r.request_body = request.value("body", nlohmann::json());
    r.status = response.at("status").get<int>();
    r.response_headers = response.value("headers", std::map<std::string, std::string>());
    r.response_body = response.value("body", nlohmann::json());
    *out = std::move(r);
  } catch (const std::exception& e) {
    return Status::DataLoss(name + ".json: unexpected shape: " + e.what());
  }
  return Status::OK();
}

ScriptedReply ListReply(const std::string& kind, const std::string& api_version,
                        const std::vector<nlohmann::json>& items,
                        const std::string& resource_version) {
  ScriptedReply reply;
  reply.body = nlohmann::json({{"kind", kind},
                               {"apiVersion", api_version},
                               {"metadata", {{"resourceVersion", resource_version}}},
                               {"items", items}})
                   .dump();
  return reply;
}

ScriptedReply WatchReply(const std::vector<std::string>& events, bool end) {
  ScriptedReply reply;
  reply.raw =
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (const std::string& event : events) {
    char size[32];
    std::snprintf(size, sizeof(size), "%zx\r\n", event.size() + 1);
    reply.raw += size + event + "\n\r\n";
  }
  if (end) reply.raw += "0\r\n\r\n";
  reply.hang = !end;
  return reply;
}

}  // namespace kube
}  // namespace gaptrain
