#include "operator/trainingjob/job_conditions.h"

#include <cstdio>
#include <ctime>

#include "operator/trainingjob/object_fields.h"

namespace gaptrain {
namespace trainingjob {
namespace {

using nlohmann::json;

// Types added later come last, so a status written before them keeps its
// order (and is not rewritten for it).
constexpr const char* kOrder[] = {"Created",           "Running",        "Restarting",
                                  "Succeeded",         "Failed",         "Suspended",
                                  "PodsUnschedulable", "ReplicaFailure", "ModelExported",
                                  "DataUnavailable",   "Admitted"};

}  // namespace

std::string FormatTime(std::chrono::system_clock::time_point time) {
  const std::time_t t = std::chrono::system_clock::to_time_t(time);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

std::optional<std::chrono::system_clock::time_point> ParseTime(const std::string& text) {
  std::tm utc{};
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &utc.tm_year, &utc.tm_mon,
                  &utc.tm_mday, &utc.tm_hour, &utc.tm_min, &utc.tm_sec, &consumed) != 6 ||
      consumed != 19) {
    return std::nullopt;
  }
  size_t at = 19;
  if (at < text.size() && text[at] == '.') {
    ++at;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9') ++at;
  }
  if (at + 1 != text.size() || text[at] != 'Z') return std::nullopt;
  if (utc.tm_mon < 1 || utc.tm_mon > 12 || utc.tm_mday < 1 || utc.tm_mday > 31 ||
      utc.tm_hour > 23 || utc.tm_min > 59 || utc.tm_sec > 60) {
    return std::nullopt;
  }
  utc.tm_year -= 1900;
  utc.tm_mon -= 1;
  const std::time_t t = timegm(&utc);
  if (t == static_cast<std::time_t>(-1)) return std::nullopt;
  return std::chrono::system_clock::from_time_t(t);
}

JobConditions::JobConditions(const json& observed_conditions, std::string now)
    : conditions_(json::object()), now_(std::move(now)) {
  if (!observed_conditions.is_array()) return;
  for (const json& c : observed_conditions) {
    const std::string type = StringAt(c, {"type"});
    if (!type.empty() && c.is_object()) conditions_[type] = c;
  }
}

std::optional<Condition> JobConditions::Get(const std::string& type) const {
  const auto it = conditions_.find(type);
  if (it == conditions_.end()) return std::nullopt;
  return Condition{type, StringAt(*it, {"status"}), StringAt(*it, {"reason"}),
                   StringAt(*it, {"message"})};
}

bool JobConditions::IsTrue(const std::string& type) const {
  const std::optional<Condition> c = Get(type);
  return c && c->status == "True";
}

void JobConditions::Set(const Condition& condition) {
  const std::optional<Condition> old = Get(condition.type);
  json c = conditions_.contains(condition.type) ? conditions_[condition.type] : json::object();
  c["type"] = condition.type;
  c["status"] = condition.status;
  c["reason"] = condition.reason;
  c["message"] = condition.message;
  const bool transition = !old || old->status != condition.status;
  const bool changed = transition || old->reason != condition.reason ||
                       old->message != condition.message;
  if (transition || StringAt(c, {"lastTransitionTime"}).empty()) {
    c["lastTransitionTime"] = now_;
  }
  if (changed || StringAt(c, {"lastUpdateTime"}).empty()) c["lastUpdateTime"] = now_;
  conditions_[condition.type] = std::move(c);
}

void JobConditions::Clear(const std::string& type, const std::string& reason,
                          const std::string& message) {
  if (IsTrue(type)) Set(Condition{type, "False", reason, message});
}

json JobConditions::ToJson() const {
  json list = json::array();
  for (const char* type : kOrder) {
    const auto it = conditions_.find(type);
    if (it != conditions_.end()) list.push_back(*it);
  }
  return list;
}

}  // namespace trainingjob
}  // namespace gaptrain
