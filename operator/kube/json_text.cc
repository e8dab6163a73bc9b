#include "operator/kube/json_text.h"

#include <exception>

namespace gaptrain {
namespace kube {

Status ParseJson(std::string_view text, nlohmann::json* out) {
  bool too_deep = false;
  auto limit_depth = [&too_deep](int depth, nlohmann::json::parse_event_t event,
                                 nlohmann::json&) {
    if (depth >= kMaxJsonDepth && (event == nlohmann::json::parse_event_t::object_start ||
                                   event == nlohmann::json::parse_event_t::array_start)) {
      too_deep = true;
      return false;  // drop the subtree instead of building it
    }
    return true;
  };
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(text.begin(), text.end(), limit_depth);
  } catch (const std::exception& e) {
    return Status::DataLoss(std::string("not JSON: ") + e.what());
  }
  if (too_deep) {
    return Status::DataLoss("not JSON: nested deeper than " + std::to_string(kMaxJsonDepth) +
                            " levels");
  }
  *out = std::move(value);
  return Status::OK();
}

std::string Excerpt(std::string_view text, size_t limit) {
  if (text.size() <= limit) return std::string(text);
  return std::string(text.substr(0, limit)) + "...";
}

}  // namespace kube
}  // namespace gaptrain
