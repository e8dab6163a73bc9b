// Parsing JSON that came over the network: never throws, never recurses
// without bound (nesting deeper than kMaxJsonDepth is an error, so hostile
// input cannot exhaust the stack when the value is used or destroyed).

#ifndef GAPTRAIN_OPERATOR_KUBE_JSON_TEXT_H_
#define GAPTRAIN_OPERATOR_KUBE_JSON_TEXT_H_

#include <nlohmann/json.hpp>
#include <string_view>

#include "services/base/status.h"

namespace gaptrain {
namespace kube {

// Kubernetes objects nest a few dozen levels; CRD schemas somewhat more.
constexpr int kMaxJsonDepth = 200;

// Parses `text` as one JSON value. DATA_LOSS "not JSON: <why>" otherwise.
Status ParseJson(std::string_view text, nlohmann::json* out);

// `text` cut to `limit` bytes, with "..." when cut: for error messages.
std::string Excerpt(std::string_view text, size_t limit = 200);

}  // namespace kube
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_KUBE_JSON_TEXT_H_
