// Checks that PEM text holds what a TLS context will need, so that a bad
// certificate or key is reported where it was configured (a kubeconfig
// field, an in-cluster file) rather than at the first connection.

#ifndef GAPTRAIN_OPERATOR_KUBE_PEM_H_
#define GAPTRAIN_OPERATOR_KUBE_PEM_H_

#include <string>

#include "services/base/status.h"

namespace gaptrain {
namespace kube {

// OK when `pem` holds at least one X.509 certificate and nothing that fails
// to parse; INVALID_ARGUMENT "not a PEM certificate: <why>" otherwise.
Status CheckCertificatesPem(const std::string& pem);

// OK when `pem` holds a private key (PKCS#1, PKCS#8 or EC, unencrypted).
Status CheckPrivateKeyPem(const std::string& pem);

// The OpenSSL error queue as text (emptied), "" when empty.
std::string TakeOpensslErrors();

}  // namespace kube
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_KUBE_PEM_H_
