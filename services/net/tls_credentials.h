// TLS for gaptrain's gRPC servers and channels, from the PEM files that
// flags name (--tls-cert/--tls-key on a server, --master-ca and
// --coordinator-ca on its callers). Empty file names mean plaintext, for
// loopback and tests.

#ifndef GAPTRAIN_SERVICES_NET_TLS_CREDENTIALS_H_
#define GAPTRAIN_SERVICES_NET_TLS_CREDENTIALS_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "services/base/status.h"

namespace gaptrain {

// Insecure credentials when `cert_file` is empty, else TLS serving the PEM
// certificate chain in `cert_file` with the private key in `key_file`.
// Errors name the flag (--tls-cert, --tls-key) and the file.
Status ServerCredentialsFromFiles(const std::string& cert_file, const std::string& key_file,
                                  std::shared_ptr<grpc::ServerCredentials>* credentials);

// Insecure credentials when `ca_file` is empty, else TLS trusting the PEM
// CA in `ca_file`; `flag` names the flag in errors.
Status ChannelCredentialsFromCa(const std::string& flag, const std::string& ca_file,
                                std::shared_ptr<grpc::ChannelCredentials>* credentials);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_NET_TLS_CREDENTIALS_H_
