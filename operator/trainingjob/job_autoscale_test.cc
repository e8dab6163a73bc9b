// PlanAutoscale on its own: the window as status.autoscale keeps it (begun
// by a read of the master, measured between two reads, begun again when
// the master restarted or the window does not read), a decision at most
// once per intervalSeconds with what the window measured, a decision that
// waits to be carried out, and what a job not running or no longer
// autoscaled keeps. The reconcile around it: reconcile_test.cc.

#include "operator/trainingjob/job_autoscale.h"

#include <gtest/gtest.h>

namespace gaptrain {
namespace trainingjob {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::system_clock;

const Clock::time_point kStart = Clock::from_time_t(1795413600);  // 2026-11-23T06:00:00Z

MasterScrape Read(Clock::time_point at, double version, double gap_sum, double gap_count) {
  MasterScrape m;
  m.at = at;
  m.model_version = version;
  m.gap_sum = gap_sum;
  m.gap_count = gap_count;
  return m;
}

// A running job of 2 trainers in [1, 8], maxGap 1.5, deciding every 10 s,
// all running.
AutoscaleObservation Running() {
  AutoscaleObservation o;
  o.workers.replicas = 2;
  o.workers.min_replicas = 1;
  o.workers.max_replicas = 8;
  o.workers.autoscale.enabled = true;
  o.workers.autoscale.max_gap = 1.5;
  o.workers.autoscale.interval_seconds = 10;
  o.job_running = true;
  o.generation = 3;
  o.running_trainers = 2;
  o.now = kStart;
  o.master = Read(kStart, 1000, 110, 100);
  return o;
}

// The observation `seconds` later, the master read then with `updates` more
// pushes of Gap `gap`, and status.autoscale as `plan` left it.
AutoscaleObservation Later(AutoscaleObservation o, const AutoscalePlan& plan, double after,
                           double updates, double gap) {
  const auto elapsed =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(after));
  o.now += elapsed;
  o.master = Read(o.master->at + elapsed, o.master->model_version + updates,
                  o.master->gap_sum + gap * updates, o.master->gap_count + updates);
  o.status = plan.status;
  return o;
}

TEST(JobAutoscaleTest, AReadBeginsTheWindowAndTheIntervalEndsIt) {
  const AutoscalePlan first = PlanAutoscale(Running());
  EXPECT_EQ(first.status, json::parse(R"j({"window": {"startTime": "2026-11-23T06:00:00.000000Z",
      "modelVersion": 1000.0, "gapSum": 110.0, "gapCount": 100.0, "preemptions": 0,
      "fewestTrainers": 2}})j"));
  EXPECT_FALSE(first.scale_to.has_value());
  EXPECT_EQ(first.next_check, seconds(10));

  // Not yet: nothing changes, and the window's end is when to look again.
  const AutoscalePlan early = PlanAutoscale(Later(Running(), first, 4, 400, 1.1));
  EXPECT_EQ(early.status, first.status);
  EXPECT_EQ(early.next_check, seconds(6));

  // 10 s, 1000 updates at Gap 1.1: room under maxGap 1.5, at most doubling.
  AutoscaleObservation due = Later(Running(), first, 10, 1000, 1.1);
  const AutoscalePlan grow = PlanAutoscale(due);
  ASSERT_EQ(grow.scale_to, 4u);
  EXPECT_EQ(grow.reason, "ScaledUp");
  EXPECT_EQ(grow.message,
            "Gap 1.10 leaves room under maxGap 1.50 (projected 1.30 at 4) at 100.0 updates/s: "
            "2 -> 4 trainers");
  const json& s = grow.status;
  EXPECT_EQ(s["window"]["startTime"], "2026-11-23T06:00:10.000000Z");
  EXPECT_EQ(s["window"]["modelVersion"], 2000.0);
  EXPECT_EQ(s["grownFrom"], 2);
  EXPECT_EQ(s["rateBefore"], 100.0);
  EXPECT_EQ(s["unprofitable"], 0);
  EXPECT_EQ(s["lastDecision"], json::parse(R"j({"time": "2026-11-23T06:00:10Z",
      "reason": "ScaledUp", "fromReplicas": 2, "replicas": 4, "observedGeneration": 3,
      "message": "Gap 1.10 leaves room under maxGap 1.50 (projected 1.30 at 4) at 100.0 updates/s: 2 -> 4 trainers"})j"));
  EXPECT_EQ(grow.next_check, seconds(10));
}

// The window's rate is over the time between the two reads, to the
// microsecond, not the reconcile's clock or whole seconds.
TEST(JobAutoscaleTest, TheRateIsMeasuredBetweenTheReads) {
  AutoscaleObservation o = Running();
  o.master->at = kStart + milliseconds(900);
  const AutoscalePlan first = PlanAutoscale(o);
  EXPECT_EQ(first.status["window"]["startTime"], "2026-11-23T06:00:00.900000Z");
  AutoscaleObservation due = Later(o, first, 12.5, 1000, 1.1);
  due.now = kStart + seconds(20);  // the reconcile ran later than the read
  const AutoscalePlan grow = PlanAutoscale(due);
  EXPECT_EQ(grow.status["rateBefore"], 80.0);  // 1000 updates in 12.5 s
}

TEST(JobAutoscaleTest, NoReadNoDecision) {
  const AutoscalePlan first = PlanAutoscale(Running());
  AutoscaleObservation unreachable = Later(Running(), first, 30, 3000, 1.1);
  unreachable.master.reset();
  const AutoscalePlan plan = PlanAutoscale(unreachable);
  EXPECT_EQ(plan.status, first.status);
  EXPECT_FALSE(plan.scale_to.has_value());
  EXPECT_EQ(plan.next_check, seconds(10));

  // Nor does a window begin without one.
  AutoscaleObservation never = Running();
  never.master.reset();
  EXPECT_EQ(PlanAutoscale(never).status, json::object());
}

TEST(JobAutoscaleTest, AMasterRestartOrAnUnreadableWindowBeginsANewOne) {
  const AutoscalePlan first = PlanAutoscale(Running());
  AutoscaleObservation restarted = Later(Running(), first, 30, 0, 1.1);
  restarted.master = Read(kStart + seconds(30), 900, 5, 4);  // back to its checkpoint
  AutoscalePlan plan = PlanAutoscale(restarted);
  EXPECT_FALSE(plan.scale_to.has_value());
  EXPECT_FALSE(plan.status.contains("lastDecision"));
  EXPECT_EQ(plan.status["window"]["startTime"], "2026-11-23T06:00:30.000000Z");
  EXPECT_EQ(plan.status["window"]["gapCount"], 4.0);

  // A read from before the window began (another replica's clock).
  AutoscaleObservation behind = Later(Running(), first, 30, 3000, 1.1);
  behind.master->at = kStart - seconds(5);
  plan = PlanAutoscale(behind);
  EXPECT_FALSE(plan.status.contains("lastDecision"));
  EXPECT_EQ(plan.status["window"]["startTime"], "2026-11-23T05:59:55.000000Z");

  for (const char* broken : {R"j({"window": {"startTime": "soon", "modelVersion": 1,
                                 "gapSum": 1, "gapCount": 1, "preemptions": 0}})j",
                             R"j({"window": {"startTime": "2026-11-23T06:00:00Z",
                                 "modelVersion": -1, "gapSum": 1, "gapCount": 1,
                                 "preemptions": 0}})j",
                             R"j({"window": "yes"})j", R"j([])j"}) {
    AutoscaleObservation o = Later(Running(), first, 30, 3000, 1.1);
    o.status = json::parse(broken);
    plan = PlanAutoscale(o);
    EXPECT_FALSE(plan.scale_to.has_value()) << broken;
    EXPECT_EQ(plan.status["window"]["startTime"], "2026-11-23T06:00:30.000000Z") << broken;
  }
}

TEST(JobAutoscaleTest, WhatTheWindowSawGoesToThePolicy) {
  const AutoscalePlan first = PlanAutoscale(Running());
  // One trainer not running: hold, recorded, no scale.
  AutoscaleObservation pending = Later(Running(), first, 10, 1000, 1.1);
  pending.running_trainers = 1;
  AutoscalePlan plan = PlanAutoscale(pending);
  EXPECT_FALSE(plan.scale_to.has_value());
  EXPECT_EQ(plan.status["lastDecision"]["reason"], "Holding");
  EXPECT_EQ(plan.status["lastDecision"]["replicas"], 2);
  EXPECT_EQ(plan.status["lastDecision"]["message"],
            "1 of 2 trainers not running (Pending or being replaced): holding at 2 trainers");
  EXPECT_EQ(plan.status["window"]["startTime"], "2026-11-23T06:00:10.000000Z");

  // A trainer down at a reconcile in the middle of the window (crashed,
  // replaced by the end): the window saw the fewest, and holds.
  AutoscaleObservation dip = Later(Running(), first, 5, 500, 1.1);
  dip.running_trainers = 1;
  plan = PlanAutoscale(dip);
  EXPECT_EQ(plan.status["window"]["fewestTrainers"], 1);
  EXPECT_FALSE(plan.status.contains("lastDecision"));
  AutoscaleObservation back = Later(dip, plan, 5, 500, 1.1);
  back.running_trainers = 2;
  plan = PlanAutoscale(back);
  EXPECT_FALSE(plan.scale_to.has_value());
  EXPECT_EQ(plan.status["lastDecision"]["reason"], "Holding");
  EXPECT_EQ(plan.status["window"]["fewestTrainers"], 2) << "the next window begins whole";

  // A preemption since the window began (status.preemptions 3 -> 4).
  AutoscaleObservation before = Running();
  before.preemptions = 3;
  const AutoscalePlan counted = PlanAutoscale(before);
  EXPECT_EQ(counted.status["window"]["preemptions"], 3);
  AutoscaleObservation preempted = Later(before, counted, 10, 1000, 1.1);
  preempted.preemptions = 4;
  plan = PlanAutoscale(preempted);
  EXPECT_EQ(plan.status["lastDecision"]["message"],
            "1 trainer preempted in the window: holding at 2 trainers");
  EXPECT_EQ(plan.status["window"]["preemptions"], 4);

  // Above maxGap: shrink, whatever else.
  AutoscaleObservation stale = Later(Running(), first, 10, 1000, 1.8);
  stale.workers.replicas = 4;
  stale.running_trainers = 3;
  plan = PlanAutoscale(stale);
  ASSERT_EQ(plan.scale_to, 2u);
  EXPECT_EQ(plan.reason, "ScaledDown");
  EXPECT_EQ(plan.message, "Gap 1.80 is above maxGap 1.50 (projected 1.27 at 2): 4 -> 2 trainers");

  // The memory comes back from the status: a growth that did not pay is
  // undone, and its size remembered. The growth's first window began with
  // the 2 trainers of before (the new ones were starting): it holds; the
  // next judges.
  AutoscaleObservation grown = Later(Running(), first, 10, 1000, 1.1);
  const AutoscalePlan grow = PlanAutoscale(grown);
  ASSERT_EQ(grow.scale_to, 4u);
  AutoscaleObservation starting = Later(grown, grow, 10, 1100, 1.2);
  starting.workers.replicas = 4;
  starting.running_trainers = 4;
  starting.generation = 4;
  plan = PlanAutoscale(starting);
  EXPECT_FALSE(plan.scale_to.has_value());
  EXPECT_EQ(plan.status["lastDecision"]["message"],
            "2 of 4 trainers not running (Pending or being replaced): holding at 4 trainers");
  AutoscaleObservation at_four = Later(starting, plan, 10, 1100, 1.2);  // 110/s, not 150
  plan = PlanAutoscale(at_four);
  ASSERT_EQ(plan.scale_to, 2u);
  EXPECT_EQ(plan.status["unprofitable"], 4);
  EXPECT_EQ(plan.status["grownFrom"], 0);
}

// The status was written with a growth, the scale was not (a conflict, the
// API unavailable): it is carried out while the spec is unchanged, without
// a new decision; a changed spec (the scale done, or a user's) ends it.
TEST(JobAutoscaleTest, ADecisionNotYetCarriedOutIsCarriedOutOnce) {
  const AutoscalePlan first = PlanAutoscale(Running());
  const AutoscalePlan grow = PlanAutoscale(Later(Running(), first, 10, 1000, 1.1));
  ASSERT_EQ(grow.scale_to, 4u);

  AutoscaleObservation again = Later(Running(), grow, 30, 3000, 1.1);  // a window is due too
  AutoscalePlan plan = PlanAutoscale(again);
  EXPECT_EQ(plan.scale_to, 4u);
  EXPECT_EQ(plan.reason, "ScaledUp");
  EXPECT_EQ(plan.message, grow.message);
  EXPECT_EQ(plan.status, grow.status);  // no new decision

  AutoscaleObservation scaled = again;  // the scale went through: generation 4
  scaled.workers.replicas = 4;
  scaled.generation = 4;
  scaled.running_trainers = 4;
  plan = PlanAutoscale(scaled);
  EXPECT_NE(plan.scale_to, 4u);
  EXPECT_NE(plan.status["lastDecision"]["time"], grow.status["lastDecision"]["time"]);

  AutoscaleObservation user = again;  // a user scaled to 3 meanwhile
  user.workers.replicas = 3;
  user.generation = 4;
  plan = PlanAutoscale(user);
  EXPECT_NE(plan.scale_to, 4u);

  // A hold waits for nothing.
  AutoscaleObservation pending = Later(Running(), first, 10, 1000, 1.1);
  pending.running_trainers = 1;
  const AutoscalePlan hold = PlanAutoscale(pending);
  EXPECT_FALSE(PlanAutoscale(Later(pending, hold, 1, 100, 1.1)).scale_to.has_value());
}

TEST(JobAutoscaleTest, NotRunningDropsTheWindowAndDisabledKeepsTheLastDecision) {
  const AutoscalePlan first = PlanAutoscale(Running());
  const AutoscalePlan grow = PlanAutoscale(Later(Running(), first, 10, 1000, 1.1));
  AutoscaleObservation restarting = Later(Running(), grow, 30, 3000, 1.1);
  restarting.job_running = false;
  restarting.generation = 4;
  AutoscalePlan plan = PlanAutoscale(restarting);
  EXPECT_FALSE(plan.scale_to.has_value());
  EXPECT_FALSE(plan.status.contains("window"));
  EXPECT_EQ(plan.status["grownFrom"], 2);
  EXPECT_EQ(plan.status["lastDecision"], grow.status["lastDecision"]);
  EXPECT_FALSE(plan.next_check.has_value());

  AutoscaleObservation off = Later(Running(), grow, 30, 3000, 1.1);
  off.workers.autoscale.enabled = false;
  plan = PlanAutoscale(off);
  EXPECT_EQ(plan.status, json({{"lastDecision", grow.status["lastDecision"]}}));
  EXPECT_FALSE(plan.scale_to.has_value());
  EXPECT_FALSE(plan.next_check.has_value());
  off.status = json::object();
  EXPECT_EQ(PlanAutoscale(off).status, json::object());
}

}  // namespace
}  // namespace trainingjob
}  // namespace gaptrain
