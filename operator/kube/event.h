// Recording events.k8s.io/v1 Events about an object (what `kubectl
// describe` shows under Events), in the form kube-apiserver accepts.
//
// What callers may rely on:
//   - The Event is created in the regarding object's namespace ("default"
//     for cluster-scoped objects) with generateName "<object name>-", which
//     is checked to be a DNS subdomain prefix (the server appends 5
//     characters).
//   - eventTime is a MicroTime: "2026-11-23T06:06:00.000000Z".
//   - Missing or bad fields are INVALID_ARGUMENT naming the field; a note
//     longer than 1024 bytes (the API's limit) is cut at a UTF-8 boundary.

#ifndef GAPTRAIN_OPERATOR_KUBE_EVENT_H_
#define GAPTRAIN_OPERATOR_KUBE_EVENT_H_

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "operator/kube/client.h"
#include "services/base/status.h"

namespace gaptrain {
namespace kube {

struct EventSpec {
  // The object the event is about, as read from the API (apiVersion, kind
  // and metadata.name/namespace/uid are used).
  nlohmann::json regarding;
  std::string type = "Normal";  // "Normal" or "Warning"
  std::string reason;           // "WorkerPreempted" (CamelCase, up to 128 bytes)
  std::string action;           // "Preempted" (up to 128 bytes)
  std::string note;             // human-readable
  std::string reporting_controller = "gaptrain.io/operator";
  std::string reporting_instance;  // the operator pod's name
  std::chrono::system_clock::time_point event_time;  // the epoch means now
};

// The Event object for `spec`, and the namespace to create it in.
Status BuildEvent(const EventSpec& spec, nlohmann::json* event, std::string* ns);

// Builds the Event and creates it; *created (when given) is what the server stored.
Status CreateEvent(Client* client, const EventSpec& spec, nlohmann::json* created = nullptr,
                   ApiError* error = nullptr);

}  // namespace kube
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_KUBE_EVENT_H_
