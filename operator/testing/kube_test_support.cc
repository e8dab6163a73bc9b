#include "operator/testing/kube_test_support.h"

#include <cstdlib>

#include "operator/kube/cluster_config.h"
#include "operator/kube/json_text.h"
#include "operator/testing/scripted_server.h"
#include "services/common/file_paths.h"
#include "services/testing/testdata_dir.h"

namespace gaptrain {
namespace kube {
namespace {

Status RunOpenssl(const std::string& dir, const std::string& args) {
  const std::string log = dir + "/openssl.log";
  const std::string command = "cd '" + dir + "' && openssl " + args + " >>openssl.log 2>&1";
  if (std::system(command.c_str()) != 0) {
    std::string output;
    ReadFileToString(log, &output).ok();
    return Status::Internal("openssl " + args + " failed:\n" + output);
  }
  return Status::OK();
}

// A self-signed CA named `name`.
Status MakeCa(const std::string& dir, const std::string& name) {
  return RunOpenssl(dir, "req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
                         "-keyout " + name + ".key -out " + name + ".crt -days 2 -subj /CN=" +
                             name + " -addext basicConstraints=critical,CA:TRUE "
                                    "-addext keyUsage=critical,keyCertSign,cRLSign");
}

// A leaf certificate `name` signed by ca.crt, with the extensions in `ext`.
Status MakeLeaf(const std::string& dir, const std::string& name, const std::string& subject,
                const std::string& ext) {
  Status s = RunOpenssl(dir, "req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
                             "-keyout " + name + ".key -out " + name + ".csr -subj " + subject);
  if (!s.ok()) return s;
  const std::string ext_file = dir + "/" + name + ".ext";
  FILE* f = std::fopen(ext_file.c_str(), "w");
  if (f == nullptr) return Status::Internal("cannot write " + ext_file);
  std::fputs(ext.c_str(), f);
  std::fclose(f);
  return RunOpenssl(dir, "x509 -req -in " + name + ".csr -CA ca.crt -CAkey ca.key "
                         "-CAcreateserial -days 2 -out " + name + ".crt -extfile " + name +
                             ".ext");
}

}  // namespace

Status MakeTestCertificates(const std::string& dir, TestCertificates* out) {
  GAPTRAIN_RETURN_IF_ERROR(MakeCa(dir, "ca"));
  GAPTRAIN_RETURN_IF_ERROR(MakeCa(dir, "other-ca"));
  GAPTRAIN_RETURN_IF_ERROR(MakeLeaf(dir, "server", "/CN=kube-apiserver",
                                    "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                    "extendedKeyUsage=serverAuth\n"));
  GAPTRAIN_RETURN_IF_ERROR(MakeLeaf(dir, "client", "/O=system:masters/CN=gaptrain-operator",
                                    "extendedKeyUsage=clientAuth\n"));
  TestCertificates c;
  c.ca_file = dir + "/ca.crt";
  c.server_cert_file = dir + "/server.crt";
  c.server_key_file = dir + "/server.key";
  c.client_cert_file = dir + "/client.crt";
  c.client_key_file = dir + "/client.key";
  c.other_ca_file = dir + "/other-ca.crt";
  GAPTRAIN_RETURN_IF_ERROR(ReadFileToString(c.ca_file, &c.ca_pem));
  GAPTRAIN_RETURN_IF_ERROR(ReadFileToString(c.client_cert_file, &c.client_cert_pem));
  GAPTRAIN_RETURN_IF_ERROR(ReadFileToString(c.client_key_file, &c.client_key_pem));
  GAPTRAIN_RETURN_IF_ERROR(ReadFileToString(c.other_ca_file, &c.other_ca_pem));
  *out = std::move(c);
  return Status::OK();
}

Status ReadRecordedFile(const std::string& name, std::string* out) {
  std::string dir;
  GAPTRAIN_RETURN_IF_ERROR(FindRecordedK8sDir(&dir));
  return ReadFileToString(dir + "/" + name, out);
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

nlohmann::json YamlToJson(const YAML::Node& node) {
  if (node.IsMap()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& kv : node) out[kv.first.Scalar()] = YamlToJson(kv.second);
    return out;
  }
  if (node.IsSequence()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& item : node) out.push_back(YamlToJson(item));
    return out;
  }
  if (node.IsNull()) return nullptr;
  const std::string& s = node.Scalar();
  if (node.Tag() != "!") {
    if (s == "true" || s == "false") return s == "true";
    char* end = nullptr;
    const long long n = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && *end == '\0') return n;
  }
  return s;
}

}  // namespace kube
}  // namespace gaptrain
