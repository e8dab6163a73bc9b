// Base64 as Kubernetes uses it (Go's base64.StdEncoding: padded, no line
// breaks): Secret data and continue tokens.

#ifndef GAPTRAIN_OPERATOR_TESTING_BASE64_H_
#define GAPTRAIN_OPERATOR_TESTING_BASE64_H_

#include <string>

namespace gaptrain {
namespace kube_testing {

std::string Base64Encode(const std::string& bytes);

// Strict decoding. On failure returns false and sets *error_offset to the
// offset of the first byte that is wrong, as Go's CorruptInputError does.
bool Base64Decode(const std::string& text, std::string* bytes, long* error_offset);

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_BASE64_H_
