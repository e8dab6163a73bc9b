// IssueJobCertificate: the certificate a TrainingJob's gRPC servers (its
// master and coordinator) serve in-cluster TLS with, issued by the
// operator per job: a fresh ECDSA P-256 key and a self-signed certificate
// for the job's Service names, which is also the CA every job pod trusts.
// No cluster CA, no cert-manager: the operator never reads it back (it may
// create Secrets, not read them), so the first Secret created keeps the
// job's certificate and later issues are thrown away.
//
// What callers may rely on: `cert_pem` is a v3 certificate, CA:TRUE,
// keyUsage digitalSignature and keyCertSign, extendedKeyUsage serverAuth,
// subjectAltName DNS:<each of dns_names>, valid from an hour ago for
// `valid_days`; `key_pem` its PKCS#8 private key. Fresh randomness each
// call (the kernel's, through OpenSSL).

#ifndef GAPTRAIN_OPERATOR_JOB_CERTIFICATE_H_
#define GAPTRAIN_OPERATOR_JOB_CERTIFICATE_H_

#include <string>
#include <vector>

#include "services/base/status.h"

namespace gaptrain {

struct JobCertificate {
  std::string cert_pem;
  std::string key_pem;
};

// `dns_names` must not be empty; the first is also the subject's CN.
Status IssueJobCertificate(const std::vector<std::string>& dns_names, int valid_days,
                           JobCertificate* out);

}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_JOB_CERTIFICATE_H_
