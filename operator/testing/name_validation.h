// Kubernetes' rules for names, label keys and label values
// (k8s.io/apimachinery/pkg/util/validation). Each function returns the
// messages the real server gives for a violation, empty when the value is
// valid, so callers can build the same 422 causes.

#ifndef GAPTRAIN_OPERATOR_TESTING_NAME_VALIDATION_H_
#define GAPTRAIN_OPERATOR_TESTING_NAME_VALIDATION_H_

#include <string>
#include <vector>

namespace gaptrain {
namespace kube_testing {

// Object names of most kinds, namespaces excepted: "mnist-trainer-0".
std::vector<std::string> DnsSubdomainErrors(const std::string& value);
// Container names: at most 63 characters of [a-z0-9-].
std::vector<std::string> DnsLabelErrors(const std::string& value);
// Service names: start with a letter, at most 63 characters.
std::vector<std::string> Dns1035LabelErrors(const std::string& value);
// Label and annotation keys: "[prefix/]name".
std::vector<std::string> QualifiedNameErrors(const std::string& value);
// Label values; "" is valid.
std::vector<std::string> LabelValueErrors(const std::string& value);

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_NAME_VALIDATION_H_
