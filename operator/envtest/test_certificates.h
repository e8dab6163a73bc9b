// Throwaway certificates for tests, made with the openssl command: a CA and
// leaf certificates it signs (EC P-256, valid for two days). The control
// plane's and the client library's tests both use them.
//
// What callers may rely on: files are DIR/NAME.crt and DIR/NAME.key; the
// openssl commands' output is appended to DIR/openssl.log, and an error
// holds it.

#ifndef GAPTRAIN_OPERATOR_ENVTEST_TEST_CERTIFICATES_H_
#define GAPTRAIN_OPERATOR_ENVTEST_TEST_CERTIFICATES_H_

#include <string>

#include "services/base/status.h"

namespace gaptrain {
namespace envtest {

// `openssl ARGS` in `dir`.
Status RunOpenssl(const std::string& dir, const std::string& args);

// A self-signed CA whose common name is `name`.
Status MakeTestCa(const std::string& dir, const std::string& name);

// A leaf certificate `name` for `subject` ("/CN=kube-apiserver") signed by
// DIR/CA.crt, with the extensions in `ext` (openssl's extfile lines:
// "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n").
Status MakeTestLeaf(const std::string& dir, const std::string& name, const std::string& subject,
                    const std::string& ext, const std::string& ca = "ca");

}  // namespace envtest
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_ENVTEST_TEST_CERTIFICATES_H_
