// How observed pods read: each preemption signal, failures with and
// without exit codes, exit 0 before and after the job ended, readiness,
// labels; the recorded pod a node shutdown left behind; and bad input.

#include "operator/trainingjob/pod_state.h"

#include <gtest/gtest.h>

#include "operator/testing/kube_test_support.h"

namespace gaptrain {
namespace trainingjob {
namespace {

using nlohmann::json;

json Pod(const char* status_json, bool terminating = false) {
  json pod = json::parse(R"({"metadata": {"name": "mnist-trainer-2", "uid": "u2",
      "labels": {"gaptrain.io/replica-type": "trainer", "gaptrain.io/replica-index": "2"}}})");
  pod["status"] = json::parse(status_json);
  if (terminating) pod["metadata"]["deletionTimestamp"] = "2026-11-23T06:00:00Z";
  return pod;
}

TEST(PodStateTest, ReadsIdentityAndReadiness) {
  const PodState s = ReadPodState(
      Pod(R"({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]})"), false);
  EXPECT_EQ(s.name, "mnist-trainer-2");
  EXPECT_EQ(s.uid, "u2");
  ASSERT_TRUE(s.type.has_value());
  EXPECT_EQ(*s.type, ReplicaType::kTrainer);
  EXPECT_EQ(s.index, 2);
  EXPECT_TRUE(s.ready);
  EXPECT_TRUE(s.running());
  EXPECT_EQ(s.loss, PodLoss::kNone);

  const PodState not_ready = ReadPodState(
      Pod(R"({"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]})"), false);
  EXPECT_FALSE(not_ready.ready);
  EXPECT_EQ(not_ready.loss, PodLoss::kNone);
  EXPECT_EQ(ReadPodState(Pod(R"({"phase": "Pending"})"), false).loss, PodLoss::kNone);
  EXPECT_TRUE(ReadPodState(Pod(R"({})"), false).active());
}

TEST(PodStateTest, EachPreemptionSignal) {
  struct Case {
    const char* status;
    bool terminating;
    const char* reason;
    bool node_lost;
  } cases[] = {
      {R"({"phase": "Running", "conditions": [{"type": "DisruptionTarget", "status": "True",
           "reason": "PreemptionByScheduler"}]})",
       false, "DisruptionTarget (PreemptionByScheduler)", false},
      {R"({"phase": "Failed", "reason": "Evicted", "message": "low on memory"})", false,
       "node event Evicted", false},
      {R"({"phase": "Running", "reason": "NodeLost"})", false, "node event NodeLost", true},
      {R"({"phase": "Failed", "reason": "Terminated"})", false, "node event Terminated", false},
      {R"({"phase": "Failed", "reason": "Shutdown"})", false, "node event Shutdown", false},
      {R"({"phase": "Unknown"})", false, "node unreachable (phase Unknown)", true},
      {R"({"phase": "Running"})", true, "deleted", false},
      {R"({"phase": "Succeeded", "containerStatuses": [{"name": "gaptrain",
           "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]})",
       false, "exited 0 before the job ended (SIGTERM)", false},
  };
  for (const Case& c : cases) {
    const PodState s = ReadPodState(Pod(c.status, c.terminating), /*job_ended=*/false);
    EXPECT_EQ(s.loss, PodLoss::kPreempted) << c.status;
    EXPECT_EQ(s.loss_reason, c.reason) << c.status;
    EXPECT_EQ(s.node_lost, c.node_lost) << c.status;
  }
}

TEST(PodStateTest, ExitZeroAfterTheJobEndedIsCompletion) {
  const PodState s = ReadPodState(Pod(R"({"phase": "Succeeded"})"), /*job_ended=*/true);
  EXPECT_EQ(s.loss, PodLoss::kCompleted);
  EXPECT_TRUE(s.finished());
}

TEST(PodStateTest, FailuresCarryTheExitCode) {
  const PodState s = ReadPodState(
      Pod(R"({"phase": "Failed", "containerStatuses": [
            {"name": "sidecar", "state": {"terminated": {"exitCode": 0}}},
            {"name": "gaptrain", "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}]})"),
      false);
  EXPECT_EQ(s.loss, PodLoss::kFailed);
  ASSERT_TRUE(s.exit_code.has_value());
  EXPECT_EQ(*s.exit_code, 137);
  EXPECT_EQ(s.loss_reason, "exit code 137 (OOMKilled)");

  // Without gaptrain's container, the one that failed explains it.
  const PodState other = ReadPodState(
      Pod(R"({"phase": "Failed", "containerStatuses": [
            {"name": "a", "state": {"terminated": {"exitCode": 0}}},
            {"name": "b", "state": {"terminated": {"exitCode": 3, "reason": "Error"}}}]})"),
      false);
  EXPECT_EQ(*other.exit_code, 3);

  const PodState unknown = ReadPodState(Pod(R"({"phase": "Failed", "reason": "OutOfcpu"})"), false);
  EXPECT_EQ(unknown.loss, PodLoss::kFailed);
  EXPECT_FALSE(unknown.exit_code.has_value());
  EXPECT_EQ(unknown.loss_reason, "pod failed (OutOfcpu)");
}

TEST(PodStateTest, TheRecordedNodeShutdownIsAPreemption) {
  kube::Recording r;
  const Status status = kube::LoadRecording("pod-status-disruption-target", &r);
  ASSERT_TRUE(status.ok()) << status.ToString();
  const PodState s = ReadPodState(r.response_body, false);
  EXPECT_EQ(s.name, "mnist-trainer-0");
  EXPECT_EQ(s.type, ReplicaType::kTrainer);
  EXPECT_EQ(s.index, 0);
  EXPECT_EQ(s.loss, PodLoss::kPreempted);
  EXPECT_EQ(s.loss_reason, "DisruptionTarget (TerminationByKubelet)");
  EXPECT_EQ(s.exit_code, 143);
}

// The scheduler's verdict as kube-scheduler v1.26 writes it on a pod it
// cannot place; a bound, running, or deleted pod no longer waits.
TEST(PodStateTest, APendingPodTheSchedulerCannotPlaceWaits) {
  const char* kUnschedulable = R"({"phase": "Pending", "conditions": [{"type": "PodScheduled",
      "status": "False", "reason": "Unschedulable", "lastProbeTime": null,
      "lastTransitionTime": "2026-11-23T06:00:00Z",
      "message": "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. )"
                               R"(preemption: 0/1 nodes are available: 1 Preemption is not )"
                               R"(helpful for scheduling.."}]})";
  const PodState s = ReadPodState(Pod(kUnschedulable), false);
  EXPECT_TRUE(s.unschedulable);
  EXPECT_EQ(s.scheduling_message,
            "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. "
            "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling..");
  EXPECT_EQ(s.loss, PodLoss::kNone);

  EXPECT_FALSE(ReadPodState(Pod(kUnschedulable, /*terminating=*/true), false).unschedulable);
  json bound = Pod(kUnschedulable);
  bound["spec"]["nodeName"] = "node-a";
  EXPECT_FALSE(ReadPodState(bound, false).unschedulable);
  json running = Pod(kUnschedulable);
  running["status"]["phase"] = "Running";
  EXPECT_FALSE(ReadPodState(running, false).unschedulable);
  // Gated or not yet tried: not the scheduler's refusal.
  EXPECT_FALSE(ReadPodState(Pod(R"({"phase": "Pending", "conditions": [{"type": "PodScheduled",
      "status": "False", "reason": "SchedulingGated"}]})"), false).unschedulable);
  EXPECT_FALSE(ReadPodState(Pod(R"({"phase": "Pending"})"), false).unschedulable);
}

TEST(PodStateTest, OddObjectsReadAsNothing) {
  for (const char* text : {R"(null)", R"([])", R"({"metadata": 5})",
                           R"({"metadata": {"labels": {"gaptrain.io/replica-index": "-1"}}})",
                           R"({"status": {"phase": 7, "conditions": "Ready"}})",
                           R"({"status": {"containerStatuses": [{"state": {"terminated": 1}}]}})"}) {
    const PodState s = ReadPodState(json::parse(text), false);
    EXPECT_EQ(s.loss, PodLoss::kNone) << text;
    EXPECT_EQ(s.index, -1) << text;
    EXPECT_FALSE(s.type.has_value()) << text;
  }
}

}  // namespace
}  // namespace trainingjob
}  // namespace gaptrain
