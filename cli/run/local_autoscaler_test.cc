// Tests LocalAutoscaler's windows and its wiring to DecideTrainers, with
// observations replayed at explicit times: each decision is compared with
// DecideTrainers on the window the header promises (its N, the fewest
// trainers running, the trainers lost, the length, the master's moves), a
// master restart begins a new window without a decision, observations
// without the master's counters end no window, and the changes are listed
// with their times. Also TrainerSlotsToChange.

#include "cli/run/local_autoscaler.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

namespace gaptrain {
namespace {

using Action = AutoscaleDecision::Action;

// The e2e test's job: 1 trainer to start, in [1, 4], a Gap bound that
// never binds, a decision every second.
WorkersSpec Workers(uint32_t min, uint32_t replicas, uint32_t max, double max_gap = 1000) {
  WorkersSpec w;
  w.min_replicas = min;
  w.replicas = replicas;
  w.max_replicas = max;
  w.autoscale.enabled = true;
  w.autoscale.max_gap = max_gap;
  w.autoscale.min_gain = 0.5;
  w.autoscale.interval_seconds = 1;
  return w;
}

AutoscaleObservation At(double seconds, double version, double gap_sum, double gap_count,
                        uint32_t running, uint64_t lost = 0) {
  AutoscaleObservation o;
  o.seconds = seconds;
  o.master_reachable = true;
  o.master.model_version = version;
  o.master.gap_sum = gap_sum;
  o.master.gap_count = gap_count;
  o.running = running;
  o.trainers_lost = lost;
  return o;
}

AutoscaleObservation MasterDown(double seconds, uint32_t running) {
  AutoscaleObservation o;
  o.seconds = seconds;
  o.running = running;
  return o;
}

AutoscaleWindow Window(uint32_t replicas, uint32_t running, uint32_t preemptions, double seconds,
                       double updates, double gap_sum, double gap_count) {
  AutoscaleWindow w;
  w.replicas = replicas;
  w.running = running;
  w.preemptions = preemptions;
  w.seconds = seconds;
  w.updates = updates;
  w.gap_sum = gap_sum;
  w.gap_count = gap_count;
  return w;
}

// Feeds `o`; expects a decision equal to DecideTrainers's on `expected`
// with the memory *policy_memory (kept alongside the autoscaler's).
void ExpectDecision(LocalAutoscaler* autoscaler, const WorkersSpec& workers,
                    const AutoscaleObservation& o, const AutoscaleWindow& expected,
                    AutoscaleMemory* policy_memory, AutoscaleDecision* decision) {
  ASSERT_TRUE(autoscaler->Observe(o, decision)) << "no decision at " << o.seconds << " s";
  const AutoscaleDecision want = DecideTrainers(workers, expected, policy_memory);
  EXPECT_EQ(decision->action, want.action) << decision->message;
  EXPECT_EQ(decision->replicas, want.replicas) << decision->message;
  EXPECT_EQ(decision->message, want.message);
  EXPECT_EQ(autoscaler->replicas(), want.replicas);
}

TEST(LocalAutoscalerTest, StartsAtReplicasAndDecidesOnlyAfterAnInterval) {
  const WorkersSpec w = Workers(1, 2, 4);
  LocalAutoscaler autoscaler(w);
  EXPECT_EQ(autoscaler.replicas(), 2u);
  AutoscaleDecision d;
  // No window before the master's counters are known.
  EXPECT_FALSE(autoscaler.Observe(MasterDown(0, 0), &d));
  EXPECT_FALSE(autoscaler.Observe(MasterDown(5, 2), &d));
  EXPECT_FALSE(autoscaler.Observe(At(6, 0, 0, 0, 2), &d));  // the window begins
  EXPECT_FALSE(autoscaler.Observe(At(6.5, 50, 60, 50, 2), &d));
  EXPECT_FALSE(autoscaler.Observe(At(6.99, 99, 120, 99, 2), &d));
  AutoscaleMemory memory;
  ExpectDecision(&autoscaler, w, At(7, 100, 125, 100, 2), Window(2, 2, 0, 1, 100, 125, 100),
                 &memory, &d);
  EXPECT_EQ(d.action, Action::kGrow);
  EXPECT_EQ(d.replicas, 4u);
}

// The e2e test's course: 1 -> 2 -> 4, holding while the new trainers start.
TEST(LocalAutoscalerTest, GrowsHoldsWhileTrainersStartAndGrowsAgain) {
  const WorkersSpec w = Workers(1, 1, 4);
  LocalAutoscaler autoscaler(w);
  AutoscaleMemory memory;
  AutoscaleDecision d;
  EXPECT_FALSE(autoscaler.Observe(At(2, 0, 0, 0, 0), &d));
  // trainer-0 registered at 2.5 s: the first window did not see it all along.
  EXPECT_FALSE(autoscaler.Observe(At(2.5, 10, 10, 10, 1), &d));
  ExpectDecision(&autoscaler, w, At(3, 40, 40, 40, 1), Window(1, 0, 0, 1, 40, 40, 40), &memory, &d);
  EXPECT_EQ(d.action, Action::kHold);
  EXPECT_EQ(d.message,
            "1 of 1 trainers not running (Pending or being replaced): holding at 1 "
            "trainers");
  // A clean window at 1 trainer, 80 updates/s: it doubles.
  ExpectDecision(&autoscaler, w, At(4, 120, 120, 80, 1), Window(1, 1, 0, 1, 80, 80, 40), &memory,
                 &d);
  EXPECT_EQ(d.action, Action::kGrow);
  EXPECT_EQ(autoscaler.replicas(), 2u);
  // trainer-1 starts: the window it registered in holds, and so does the
  // one that began before it registered.
  ExpectDecision(&autoscaler, w, At(5, 200, 200, 160, 1), Window(2, 1, 0, 1, 80, 80, 80), &memory,
                 &d);
  EXPECT_EQ(d.action, Action::kHold);
  EXPECT_FALSE(autoscaler.Observe(At(5.5, 240, 240, 200, 2), &d));
  ExpectDecision(&autoscaler, w, At(6, 280, 290, 240, 2), Window(2, 1, 0, 1, 80, 90, 80), &memory,
                 &d);
  EXPECT_EQ(d.action, Action::kHold);
  // Both at work for a whole window, at 150 updates/s (70 more than at 1
  // trainer, over minGain's 40): the growth paid, and it doubles again.
  ExpectDecision(&autoscaler, w, At(7, 430, 490, 390, 2), Window(2, 2, 0, 1, 150, 200, 150),
                 &memory, &d);
  EXPECT_EQ(d.action, Action::kGrow);
  EXPECT_EQ(autoscaler.replicas(), 4u);

  // Only the changes are listed, with the time of the observation.
  ASSERT_EQ(autoscaler.changes().size(), 2u);
  const AutoscaleChange& first = autoscaler.changes()[0];
  EXPECT_EQ(first.at_seconds, 4);
  EXPECT_EQ(first.reason, "ScaledUp");
  EXPECT_EQ(first.from, 1u);
  EXPECT_EQ(first.to, 2u);
  EXPECT_NE(first.message.find("1 -> 2 trainers"), std::string::npos) << first.message;
  const AutoscaleChange& second = autoscaler.changes()[1];
  EXPECT_EQ(second.at_seconds, 7);
  EXPECT_EQ(second.from, 2u);
  EXPECT_EQ(second.to, 4u);
  EXPECT_EQ(second.message, d.message);
}

// The memory is kept between decisions: a growth that added too few
// updates/s is undone, and never tried again.
TEST(LocalAutoscalerTest, UndoesAGrowthThatDidNotPay) {
  const WorkersSpec w = Workers(1, 2, 4);
  LocalAutoscaler autoscaler(w);
  AutoscaleMemory memory;
  AutoscaleDecision d;
  EXPECT_FALSE(autoscaler.Observe(At(0, 0, 0, 0, 2), &d));
  ExpectDecision(&autoscaler, w, At(1, 100, 110, 100, 2), Window(2, 2, 0, 1, 100, 110, 100),
                 &memory, &d);
  ASSERT_EQ(autoscaler.replicas(), 4u);
  // 4 trainers at 110 updates/s against 100 at 2: back to 2.
  ExpectDecision(&autoscaler, w, At(2, 210, 230, 200, 4), Window(4, 2, 0, 1, 110, 120, 100),
                 &memory, &d);
  EXPECT_EQ(d.action, Action::kHold) << "the window began with 2 of 4 running";
  ExpectDecision(&autoscaler, w, At(3, 320, 360, 300, 4), Window(4, 4, 0, 1, 110, 130, 100),
                 &memory, &d);
  EXPECT_EQ(d.action, Action::kShrink);
  EXPECT_EQ(autoscaler.replicas(), 2u);
  ASSERT_EQ(autoscaler.changes().size(), 2u);
  EXPECT_EQ(autoscaler.changes()[1].reason, "ScaledDown");
  EXPECT_EQ(autoscaler.changes()[1].from, 4u);
  EXPECT_EQ(autoscaler.changes()[1].to, 2u);
  // Later clean windows at 2 grow to 3 at most: 4 did not pay.
  ExpectDecision(&autoscaler, w, At(4, 420, 470, 400, 2), Window(2, 2, 0, 1, 100, 110, 100),
                 &memory, &d);
  EXPECT_EQ(d.replicas, 3u);
}

TEST(LocalAutoscalerTest, AGapAboveMaxGapShrinks) {
  const WorkersSpec w = Workers(1, 4, 4, /*max_gap=*/1.5);
  LocalAutoscaler autoscaler(w);
  AutoscaleMemory memory;
  AutoscaleDecision d;
  EXPECT_FALSE(autoscaler.Observe(At(0, 1000, 1500, 1000, 4), &d));
  // Mean Gap 3 over the window's 100 pushes, though 1.5 over the run.
  ExpectDecision(&autoscaler, w, At(1, 1100, 1800, 1100, 4), Window(4, 4, 0, 1, 100, 300, 100),
                 &memory, &d);
  EXPECT_EQ(d.action, Action::kShrink);
  EXPECT_EQ(d.replicas, 1u);
  ASSERT_EQ(autoscaler.changes().size(), 1u);
  EXPECT_EQ(autoscaler.changes()[0].reason, "ScaledDown");
}

// Trainers lost in the window hold N; those lost before it do not count.
TEST(LocalAutoscalerTest, TrainersLostInTheWindowAreItsPreemptions) {
  const WorkersSpec w = Workers(1, 2, 4);
  LocalAutoscaler autoscaler(w);
  AutoscaleMemory memory;
  AutoscaleDecision d;
  EXPECT_FALSE(autoscaler.Observe(At(0, 0, 0, 0, 2, /*lost=*/3), &d));
  ExpectDecision(&autoscaler, w, At(1, 100, 100, 100, 2, 5), Window(2, 2, 2, 1, 100, 100, 100),
                 &memory, &d);
  EXPECT_EQ(d.action, Action::kHold);
  EXPECT_EQ(d.message, "2 trainers preempted in the window: holding at 2 trainers");
  ExpectDecision(&autoscaler, w, At(2, 200, 200, 200, 2, 5), Window(2, 2, 0, 1, 100, 100, 100),
                 &memory, &d);
  EXPECT_EQ(d.action, Action::kGrow);
}

TEST(LocalAutoscalerTest, AMasterRestartBeginsANewWindowWithoutADecision) {
  const WorkersSpec w = Workers(1, 2, 4);
  LocalAutoscaler autoscaler(w);
  AutoscaleMemory memory;
  AutoscaleDecision d;
  EXPECT_FALSE(autoscaler.Observe(At(0, 500, 600, 500, 2), &d));
  // The master is down for a while: no window ends, but running counts.
  EXPECT_FALSE(autoscaler.Observe(MasterDown(1, 1), &d));
  EXPECT_FALSE(autoscaler.Observe(MasterDown(2, 2), &d));
  // Back from a checkpoint at version 450, its histogram from zero.
  EXPECT_FALSE(autoscaler.Observe(At(3, 450, 0, 0, 2), &d));
  EXPECT_FALSE(autoscaler.Observe(At(3.5, 480, 30, 30, 2), &d));
  // The window is measured from the restart, not across it.
  ExpectDecision(&autoscaler, w, At(4, 520, 75, 70, 2), Window(2, 2, 0, 1, 70, 75, 70), &memory,
                 &d);
  EXPECT_EQ(d.action, Action::kGrow);
  // A version restored past the window's start is a restart too: the
  // Gap's count went down.
  EXPECT_FALSE(autoscaler.Observe(At(5, 600, 10, 10, 4), &d));
  ExpectDecision(&autoscaler, w, At(6, 700, 20, 20, 4), Window(4, 4, 0, 1, 100, 10, 10), &memory,
                 &d);
}

TEST(LocalAutoscalerTest, AWindowThatSawATrainerDownHolds) {
  const WorkersSpec w = Workers(1, 2, 4);
  LocalAutoscaler autoscaler(w);
  AutoscaleMemory memory;
  AutoscaleDecision d;
  EXPECT_FALSE(autoscaler.Observe(At(0, 0, 0, 0, 2), &d));
  EXPECT_FALSE(autoscaler.Observe(MasterDown(0.5, 1), &d));  // counted though the master is down
  ExpectDecision(&autoscaler, w, At(1, 100, 100, 100, 2), Window(2, 1, 0, 1, 100, 100, 100),
                 &memory, &d);
  EXPECT_EQ(d.action, Action::kHold);
  EXPECT_TRUE(autoscaler.changes().empty());
}

TEST(LocalAutoscalerTest, NonFiniteCountersEndNoWindow) {
  const WorkersSpec w = Workers(1, 2, 4);
  LocalAutoscaler autoscaler(w);
  AutoscaleDecision d;
  EXPECT_FALSE(autoscaler.Observe(At(0, 0, 0, 0, 2), &d));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(autoscaler.Observe(At(5, 100, nan, 100, 2), &d));
  AutoscaleObservation no_version = At(6, 100, 100, 100, 2);
  no_version.master.model_version = -1;
  EXPECT_FALSE(autoscaler.Observe(no_version, &d));
  EXPECT_TRUE(autoscaler.Observe(At(7, 100, 100, 100, 2), &d));
}

TEST(TrainerSlotsToChangeTest, GrowsUpwardAndShrinksFromTheTop) {
  EXPECT_EQ(TrainerSlotsToChange(1, 4), (std::vector<size_t>{1, 2, 3}));
  EXPECT_EQ(TrainerSlotsToChange(4, 2), (std::vector<size_t>{3, 2}));
  EXPECT_EQ(TrainerSlotsToChange(2, 1), (std::vector<size_t>{1}));
  EXPECT_TRUE(TrainerSlotsToChange(3, 3).empty());
}

}  // namespace
}  // namespace gaptrain
