// The status the test node (LocalNode) writes for a pod, shaped as the
// kubelet's: phase, conditions, IPs, start time and the container's state.
// Pure functions of what the node knows, so a status that did not change
// yields the same JSON (and no write).
//
// What callers may rely on (restartPolicy Never, one container):
//   - phase: Pending while the container waits, Running while it runs,
//     then Succeeded (exit code 0) or Failed (any other code, a signal as
//     128+n, or a failure_reason such as a node shutdown).
//   - conditions: PodScheduled and Initialized True; ContainersReady and
//     Ready True while the container runs and is ready, else False with
//     reason ContainersNotReady, or PodCompleted once it has terminated.
//     A condition's lastTransitionTime changes only when its status does.
//     Conditions the node does not own (DisruptionTarget, ...) are kept.
//   - containerStatuses: one entry, for the first container: name, image,
//     imageID "", containerID once started, ready, started, restartCount 0,
//     lastState {}, and state waiting {reason, message}, running
//     {startedAt} or terminated {exitCode, signal (when killed by one),
//     reason, message, startedAt, finishedAt, containerID}.
//   - hostIP, podIP, podIPs and startTime once known.

#ifndef GAPTRAIN_OPERATOR_TESTING_POD_STATUS_H_
#define GAPTRAIN_OPERATOR_TESTING_POD_STATUS_H_

#include <nlohmann/json.hpp>

#include <string>

namespace gaptrain {
namespace kube_testing {

struct ContainerState {
  enum class Phase { kWaiting, kRunning, kTerminated };
  Phase phase = Phase::kWaiting;
  std::string waiting_reason = "ContainerCreating";
  std::string waiting_message;
  std::string container_id;
  std::string started_at;
  std::string finished_at;
  int exit_code = 0;
  int signal = 0;      // the signal that killed it, else 0
  std::string reason;  // terminated: Completed, Error, OOMKilled, StartError
  std::string message;
  bool ready = false;
};

struct PodState {
  std::string host_ip;
  std::string pod_ip;
  std::string start_time;
  ContainerState container;
  // When set, the pod ends Failed with this status.reason and
  // status.message whatever the exit code (the node shut down under it).
  std::string failure_reason;
  std::string failure_message;
};

// Sets condition `type` in status.conditions.
void SetPodCondition(nlohmann::json* status, const std::string& type, bool value,
                     const std::string& reason, const std::string& message,
                     const std::string& now);

// Writes what the kubelet owns of `pod`'s status into *status (the pod's
// current status, which keeps everything else).
void ApplyPodStatus(const nlohmann::json& pod, const PodState& state, const std::string& now,
                    nlohmann::json* status);

// "exit code 3" -> {3, 0, "Error"}; killed by SIGKILL -> {137, 9, "Error"};
// exit 0 -> "Completed". Fills the terminated fields of *container from a
// wait status (see waitpid).
void SetTerminated(int wait_status, const std::string& finished_at, ContainerState* container);

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_POD_STATUS_H_
