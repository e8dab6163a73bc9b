// JobTls: a job's own TLS certificate and key (PEM), issued by the operator
// (operator/job_certificate.h) for the names JobTlsNames
// (desired_children.h) gives, and served by its master and coordinator.

#ifndef GAPTRAIN_OPERATOR_TRAININGJOB_JOB_TLS_H_
#define GAPTRAIN_OPERATOR_TRAININGJOB_JOB_TLS_H_

#include <string>

namespace gaptrain {
namespace trainingjob {

struct JobTls {
  std::string cert_pem;  // self-signed: also the CA the job's pods trust
  std::string key_pem;
};

}  // namespace trainingjob
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TRAININGJOB_JOB_TLS_H_
