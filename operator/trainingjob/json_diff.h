// Comparing the objects the operator wants with the objects the API server
// holds, and the merge patch from one status to another.
//
// The server adds to what it is given (defaults, generated names, status)
// and leaves out Go's zero values (omitempty), so "the fields gaptrain
// owns are as desired" is a subset test, not equality.

#ifndef GAPTRAIN_OPERATOR_TRAININGJOB_JSON_DIFF_H_
#define GAPTRAIN_OPERATOR_TRAININGJOB_JSON_DIFF_H_

#include <nlohmann/json.hpp>

namespace gaptrain {
namespace trainingjob {

// Whether every field of `desired` is in `observed` with the same value:
//   - objects: each key of desired is in observed with a subset value; a
//     desired zero value (false, 0, "", [], {}, null) also matches an
//     absent key, as Go's omitempty drops it;
//   - arrays: desired's items match distinct items of observed in order
//     (observed may hold more: the server appends defaults such as
//     tolerations and the service-account volume);
//   - numbers compare by value (1 equals 1.0); other scalars by equality.
bool IsSubset(const nlohmann::json& desired, const nlohmann::json& observed);

// The JSON merge patch (RFC 7386) that turns `from` into `to`: changed
// and new keys, null for removed ones, arrays whole. {} when they are equal.
nlohmann::json MergePatch(const nlohmann::json& from, const nlohmann::json& to);

}  // namespace trainingjob
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TRAININGJOB_JSON_DIFF_H_
