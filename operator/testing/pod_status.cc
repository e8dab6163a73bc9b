#include "operator/testing/pod_status.h"

#include <sys/wait.h>

#include "operator/testing/json_fields.h"

namespace gaptrain {
namespace kube_testing {

using nlohmann::json;

namespace {

bool HasCondition(const json& status, const std::string& type) {
  for (const json& condition : ListField(status, {"conditions"})) {
    if (StringField(condition, {"type"}) == type) return true;
  }
  return false;
}

}  // namespace

void SetPodCondition(json* status, const std::string& type, bool value,
                     const std::string& reason, const std::string& message,
                     const std::string& now) {
  if (!status->is_object()) *status = json::object();
  json& conditions = (*status)["conditions"];
  if (!conditions.is_array()) conditions = json::array();
  json condition = {{"type", type},
                    {"status", value ? "True" : "False"},
                    {"lastProbeTime", nullptr},
                    {"lastTransitionTime", now}};
  if (!reason.empty()) condition["reason"] = reason;
  if (!message.empty()) condition["message"] = message;
  for (json& existing : conditions) {
    if (StringField(existing, {"type"}) != type) continue;
    if (StringField(existing, {"status"}) == condition["status"]) {
      const std::string since = StringField(existing, {"lastTransitionTime"});
      if (!since.empty()) condition["lastTransitionTime"] = since;
    }
    existing = condition;
    return;
  }
  conditions.push_back(condition);
}

void ApplyPodStatus(const json& pod, const PodState& state, const std::string& now,
                    json* status) {
  if (!status->is_object()) *status = json::object();
  const ContainerState& c = state.container;
  const json containers = ListField(pod, {"spec", "containers"});
  const json container = containers.empty() ? json::object() : containers[0];
  const std::string container_name = StringField(container, {"name"});
  const bool terminated = c.phase == ContainerState::Phase::kTerminated;
  const bool running = c.phase == ContainerState::Phase::kRunning;

  std::string phase = "Pending";
  if (running) phase = "Running";
  if (terminated) {
    phase = c.exit_code == 0 && state.failure_reason.empty() ? "Succeeded" : "Failed";
  }
  (*status)["phase"] = phase;
  if (!state.failure_reason.empty()) {
    (*status)["reason"] = state.failure_reason;
    (*status)["message"] = state.failure_message;
  }

  if (!HasCondition(*status, "PodScheduled")) {
    SetPodCondition(status, "PodScheduled", true, "", "", now);
  }
  SetPodCondition(status, "Initialized", true, "", "", now);
  const bool ready = running && c.ready;
  std::string reason, message;
  if (terminated) {
    reason = "PodCompleted";
  } else if (!ready) {
    reason = "ContainersNotReady";
    message = "containers with unready status: [" + container_name + "]";
  }
  SetPodCondition(status, "Ready", ready, reason, message, now);
  SetPodCondition(status, "ContainersReady", ready, reason, message, now);

  if (!state.host_ip.empty()) (*status)["hostIP"] = state.host_ip;
  if (!state.pod_ip.empty()) {
    (*status)["podIP"] = state.pod_ip;
    (*status)["podIPs"] = json::array({{{"ip", state.pod_ip}}});
  }
  if (!state.start_time.empty()) (*status)["startTime"] = state.start_time;

  json container_state = json::object();
  if (c.phase == ContainerState::Phase::kWaiting) {
    json waiting = {{"reason", c.waiting_reason}};
    if (!c.waiting_message.empty()) waiting["message"] = c.waiting_message;
    container_state["waiting"] = waiting;
  } else if (running) {
    container_state["running"] = {{"startedAt", c.started_at}};
  } else {
    json t = {{"exitCode", c.exit_code}, {"reason", c.reason}, {"finishedAt", c.finished_at}};
    if (c.signal != 0) t["signal"] = c.signal;
    if (!c.message.empty()) t["message"] = c.message;
    if (!c.started_at.empty()) t["startedAt"] = c.started_at;
    if (!c.container_id.empty()) t["containerID"] = c.container_id;
    container_state["terminated"] = t;
  }
  json entry = {{"name", container_name},
                {"image", StringField(container, {"image"})},
                {"imageID", ""},
                {"ready", ready},
                {"restartCount", 0},
                {"started", running},
                {"state", container_state},
                {"lastState", json::object()}};
  if (!c.container_id.empty()) entry["containerID"] = c.container_id;
  (*status)["containerStatuses"] = json::array({entry});
}

void SetTerminated(int wait_status, const std::string& finished_at, ContainerState* container) {
  container->phase = ContainerState::Phase::kTerminated;
  container->ready = false;
  container->finished_at = finished_at;
  container->signal = 0;
  if (WIFSIGNALED(wait_status)) {
    container->signal = WTERMSIG(wait_status);
    container->exit_code = 128 + container->signal;
  } else {
    container->exit_code = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128;
  }
  if (container->reason.empty()) container->reason = container->exit_code == 0 ? "Completed" : "Error";
}

}  // namespace kube_testing
}  // namespace gaptrain
