#include "services/net/tls_credentials.h"

#include <utility>

#include "services/base/file_contents.h"

namespace gaptrain {
namespace {

// The whole of a PEM file: ReadFile's error after the flag when it cannot
// be read, INVALID_ARGUMENT when it is empty.
Status ReadPem(const std::string& flag, const std::string& path, std::string* pem) {
  std::string text;
  Status s = ReadFile(path, &text);
  if (!s.ok()) return Status(s.code(), flag + ": " + s.message());
  if (text.empty()) return Status::InvalidArgument(flag + ": " + path + " is empty");
  *pem = std::move(text);
  return Status::OK();
}

}  // namespace

Status ServerCredentialsFromFiles(const std::string& cert_file, const std::string& key_file,
                                  std::shared_ptr<grpc::ServerCredentials>* credentials) {
  if (cert_file.empty()) {
    *credentials = grpc::InsecureServerCredentials();
    return Status::OK();
  }
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  GAPTRAIN_RETURN_IF_ERROR(ReadPem("--tls-cert", cert_file, &pair.cert_chain));
  GAPTRAIN_RETURN_IF_ERROR(ReadPem("--tls-key", key_file, &pair.private_key));
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back(pair);
  *credentials = grpc::SslServerCredentials(ssl);
  return Status::OK();
}

Status ChannelCredentialsFromCa(const std::string& flag, const std::string& ca_file,
                                std::shared_ptr<grpc::ChannelCredentials>* credentials) {
  if (ca_file.empty()) {
    *credentials = grpc::InsecureChannelCredentials();
    return Status::OK();
  }
  grpc::SslCredentialsOptions ssl;
  GAPTRAIN_RETURN_IF_ERROR(ReadPem(flag, ca_file, &ssl.pem_root_certs));
  *credentials = grpc::SslCredentials(ssl);
  return Status::OK();
}

}  // namespace gaptrain
