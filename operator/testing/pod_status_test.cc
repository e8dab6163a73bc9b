#include "operator/testing/pod_status.h"

#include <gtest/gtest.h>
#include <signal.h>

namespace gaptrain {
namespace kube_testing {
namespace {

using nlohmann::json;

const json kPod = {{"spec", {{"containers", {{{"name", "gaptrain"}, {"image", "gaptrain:dev"}}}}}}};

const json& ConditionOf(const json& status, const std::string& type) {
  for (const json& c : status["conditions"]) {
    if (c["type"] == type) return c;
  }
  static const json none;
  return none;
}

TEST(PodStatusTest, FollowsTheContainerThroughItsLife) {
  PodState state;
  state.host_ip = "10.200.0.1";
  state.pod_ip = "10.200.0.2";
  state.start_time = "T0";
  json status = {{"qosClass", "BestEffort"}};
  ApplyPodStatus(kPod, state, "T0", &status);
  EXPECT_EQ(status["phase"], "Pending");
  EXPECT_EQ(status["qosClass"], "BestEffort");  // not the node's: kept
  EXPECT_EQ(status["podIPs"], json::array({{{"ip", "10.200.0.2"}}}));
  EXPECT_EQ(status["containerStatuses"][0]["state"]["waiting"]["reason"], "ContainerCreating");
  EXPECT_EQ(ConditionOf(status, "Ready")["status"], "False");
  EXPECT_EQ(ConditionOf(status, "Ready")["reason"], "ContainersNotReady");
  EXPECT_EQ(ConditionOf(status, "Ready")["message"], "containers with unready status: [gaptrain]");
  EXPECT_EQ(ConditionOf(status, "PodScheduled")["status"], "True");

  state.container.phase = ContainerState::Phase::kRunning;
  state.container.started_at = "T1";
  state.container.container_id = "local://u";
  state.container.ready = true;
  ApplyPodStatus(kPod, state, "T1", &status);
  EXPECT_EQ(status["phase"], "Running");
  EXPECT_EQ(ConditionOf(status, "Ready")["status"], "True");
  EXPECT_EQ(ConditionOf(status, "Ready")["lastTransitionTime"], "T1");
  EXPECT_EQ(ConditionOf(status, "Initialized")["lastTransitionTime"], "T0");  // unchanged status
  const json running = status["containerStatuses"][0];
  EXPECT_EQ(running["state"], json({{"running", {{"startedAt", "T1"}}}}));
  EXPECT_EQ(running["ready"], true);
  EXPECT_EQ(running["started"], true);
  EXPECT_EQ(running["containerID"], "local://u");

  // Unchanged knowledge, later clock: the same status.
  json again = status;
  ApplyPodStatus(kPod, state, "T9", &again);
  EXPECT_EQ(again, status);

  SetTerminated(SIGTERM, "T2", &state.container);  // killed by SIGTERM
  ApplyPodStatus(kPod, state, "T2", &status);
  EXPECT_EQ(status["phase"], "Failed");
  const json terminated = status["containerStatuses"][0]["state"]["terminated"];
  EXPECT_EQ(terminated["exitCode"], 143);
  EXPECT_EQ(terminated["signal"], SIGTERM);
  EXPECT_EQ(terminated["reason"], "Error");
  EXPECT_EQ(terminated["startedAt"], "T1");
  EXPECT_EQ(terminated["finishedAt"], "T2");
  EXPECT_EQ(ConditionOf(status, "Ready")["reason"], "PodCompleted");
  EXPECT_EQ(ConditionOf(status, "ContainersReady")["lastTransitionTime"], "T2");
}

TEST(PodStatusTest, ExitZeroSucceedsUnlessTheNodeShutDown) {
  PodState state;
  SetTerminated(0, "T", &state.container);  // exit code 0
  EXPECT_EQ(state.container.reason, "Completed");
  json status;
  ApplyPodStatus(kPod, state, "T", &status);
  EXPECT_EQ(status["phase"], "Succeeded");
  EXPECT_FALSE(status["containerStatuses"][0]["state"]["terminated"].contains("signal"));

  state.failure_reason = "Terminated";
  state.failure_message = "Pod was terminated in response to imminent node shutdown.";
  ApplyPodStatus(kPod, state, "T", &status);
  EXPECT_EQ(status["phase"], "Failed");
  EXPECT_EQ(status["reason"], "Terminated");

  ContainerState oom;
  oom.reason = "OOMKilled";
  SetTerminated(SIGKILL, "T", &oom);
  EXPECT_EQ(oom.exit_code, 137);
  EXPECT_EQ(oom.reason, "OOMKilled");
  ContainerState exited;
  SetTerminated(3 << 8, "T", &exited);  // exit code 3
  EXPECT_EQ(exited.exit_code, 3);
  EXPECT_EQ(exited.signal, 0);
}

TEST(PodStatusTest, KeepsConditionsItDoesNotOwn) {
  json status;
  SetPodCondition(&status, "DisruptionTarget", true, "EvictionByEvictionAPI", "m", "T0");
  PodState state;
  ApplyPodStatus(kPod, state, "T1", &status);
  EXPECT_EQ(ConditionOf(status, "DisruptionTarget")["reason"], "EvictionByEvictionAPI");
  EXPECT_EQ(ConditionOf(status, "DisruptionTarget")["lastTransitionTime"], "T0");
  SetPodCondition(&status, "DisruptionTarget", true, "Other", "", "T5");
  EXPECT_EQ(ConditionOf(status, "DisruptionTarget")["lastTransitionTime"], "T0");
  EXPECT_EQ(ConditionOf(status, "DisruptionTarget")["reason"], "Other");
}

}  // namespace
}  // namespace kube_testing
}  // namespace gaptrain
