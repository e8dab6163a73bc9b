#include "operator/kube/event.h"

#include "operator/kube/api_time.h"

#include <cstdio>
#include <ctime>

namespace gaptrain {
namespace kube {
namespace {

constexpr size_t kMaxNoteBytes = 1024;
constexpr size_t kMaxShortFieldBytes = 128;
// The API server keeps at most this much of a generateName.
constexpr size_t kMaxGenerateNameBytes = 58;

std::string StringAt(const nlohmann::json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool IsAlnumLower(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// RFC 1123 subdomain, as Kubernetes validates object names.
bool IsDnsSubdomain(const std::string& name) {
  if (name.empty() || name.size() > 253) return false;
  size_t label_start = 0;
  for (size_t i = 0; i <= name.size(); ++i) {
    if (i < name.size() && name[i] != '.') {
      if (!IsAlnumLower(name[i]) && name[i] != '-') return false;
      continue;
    }
    if (i == label_start || !IsAlnumLower(name[label_start]) || !IsAlnumLower(name[i - 1])) {
      return false;
    }
    label_start = i + 1;
  }
  return true;
}

// Cuts `text` to at most `limit` bytes without splitting a UTF-8 sequence.
std::string CutUtf8(const std::string& text, size_t limit) {
  if (text.size() <= limit) return text;
  size_t end = limit;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

}  // namespace

Status BuildEvent(const EventSpec& spec, nlohmann::json* event, std::string* ns) {
  auto bad = [](const std::string& field, const std::string& why) {
    return Status::InvalidArgument("event " + field + ": " + why);
  };
  if (!spec.regarding.is_object()) return bad("regarding", "must be the object (JSON)");
  const nlohmann::json metadata = spec.regarding.value("metadata", nlohmann::json::object());
  if (!metadata.is_object()) return bad("regarding.metadata", "must be an object");
  const std::string name = StringAt(metadata, "name");
  const std::string kind = StringAt(spec.regarding, "kind");
  const std::string api_version = StringAt(spec.regarding, "apiVersion");
  if (name.empty()) return bad("regarding.metadata.name", "is required");
  if (kind.empty() || api_version.empty()) {
    return bad("regarding", "apiVersion and kind are required");
  }
  if (spec.type != "Normal" && spec.type != "Warning") {
    return bad("type", "must be Normal or Warning, got '" + spec.type + "'");
  }
  const std::pair<const char*, const std::string*> required[] = {
      {"reason", &spec.reason},
      {"action", &spec.action},
      {"reportingController", &spec.reporting_controller},
      {"reportingInstance", &spec.reporting_instance}};
  for (const auto& field : required) {
    if (field.second->empty()) return bad(field.first, "is required");
    if (field.second->size() > kMaxShortFieldBytes) {
      return bad(field.first, "is longer than " + std::to_string(kMaxShortFieldBytes) + " bytes");
    }
  }
  std::string prefix = name.substr(0, kMaxGenerateNameBytes - 1) + "-";
  if (!IsDnsSubdomain(prefix + "x0000")) {
    return bad("metadata.generateName",
               "'" + prefix + "' is not the start of a DNS subdomain (from regarding.metadata.name)");
  }

  nlohmann::json regarding = {{"apiVersion", api_version}, {"kind", kind}, {"name", name}};
  const std::string object_ns = StringAt(metadata, "namespace");
  if (!object_ns.empty()) regarding["namespace"] = object_ns;
  const std::string uid = StringAt(metadata, "uid");
  if (!uid.empty()) regarding["uid"] = uid;

  const auto when = spec.event_time == std::chrono::system_clock::time_point()
                        ? std::chrono::system_clock::now()
                        : spec.event_time;
  *event = {
      {"apiVersion", "events.k8s.io/v1"},
      {"kind", "Event"},
      {"metadata", {{"generateName", prefix}}},
      {"eventTime", FormatMicroTime(when)},
      {"reportingController", spec.reporting_controller},
      {"reportingInstance", spec.reporting_instance},
      {"action", spec.action},
      {"reason", spec.reason},
      {"note", CutUtf8(spec.note, kMaxNoteBytes)},
      {"type", spec.type},
      {"regarding", regarding},
  };
  *ns = object_ns.empty() ? "default" : object_ns;
  return Status::OK();
}

Status CreateEvent(Client* client, const EventSpec& spec, nlohmann::json* created,
                   ApiError* error) {
  nlohmann::json event;
  std::string ns;
  GAPTRAIN_RETURN_IF_ERROR(BuildEvent(spec, &event, &ns));
  return client->Create(kEvents, ns, event, created, error);
}

}  // namespace kube
}  // namespace gaptrain
