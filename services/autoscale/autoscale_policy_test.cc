#include "services/autoscale/autoscale_policy.h"

#include <gtest/gtest.h>

namespace gaptrain {
namespace {

using Action = AutoscaleDecision::Action;

WorkersSpec Workers(uint32_t min, uint32_t replicas, uint32_t max) {
  WorkersSpec w;
  w.min_replicas = min;
  w.replicas = replicas;
  w.max_replicas = max;
  w.autoscale.enabled = true;
  w.autoscale.max_gap = 1.5;
  w.autoscale.min_gain = 0.5;
  return w;
}

// A clean window: every wanted trainer running for 60 s at `rate`.
AutoscaleWindow Window(uint32_t n, double gap, double rate) {
  AutoscaleWindow w;
  w.replicas = n;
  w.running = n;
  w.seconds = 60;
  w.updates = rate * 60;
  w.gap_sum = gap * 100;
  w.gap_count = 100;
  return w;
}

TEST(AutoscalePolicyTest, GrowsByDoublingWhileTheProjectedGapHasRoom) {
  const WorkersSpec w = Workers(1, 4, 64);
  AutoscaleMemory memory;
  // Gap 1.05 at 4: 1.05 + 0.05·(8−1)/3 ≈ 1.12 at 8, far under 1.45.
  AutoscaleDecision d = DecideTrainers(w, Window(4, 1.05, 40), &memory);
  EXPECT_EQ(d.action, Action::kGrow);
  EXPECT_EQ(d.replicas, 8u);
  EXPECT_STREQ(d.Reason(), "ScaledUp");
  EXPECT_EQ(d.message,
            "Gap 1.05 leaves room under maxGap 1.50 (projected 1.12 at 8) at 40.0 updates/s: "
            "4 -> 8 trainers");
  EXPECT_EQ(memory.grown_from, 4u);
  EXPECT_DOUBLE_EQ(memory.rate_before, 40);
  // One trainer: no staleness to project from, so it doubles while the
  // Gap (GA+DANA's, against its look-ahead point) is under the aim, 1.45.
  AutoscaleMemory fresh;
  d = DecideTrainers(Workers(1, 1, 64), Window(1, 1.3, 10), &fresh);
  EXPECT_EQ(d.replicas, 2u);
  d = DecideTrainers(Workers(1, 1, 64), Window(1, 1.8, 10), &fresh);
  EXPECT_EQ(d.action, Action::kHold);
  EXPECT_EQ(d.message, "Gap 1.80 is above maxGap 1.50 at minReplicas 1: holding at 1 trainers");
}

TEST(AutoscalePolicyTest, GrowsOnlyAsFarAsTheGapAllows) {
  const WorkersSpec w = Workers(1, 8, 64);
  AutoscaleMemory memory;
  // G − 1 = 0.2 at 8 (0.2/7 a trainer); aim 1.45: n − 1 <= 0.45·7/0.2 = 15.75.
  AutoscaleDecision d = DecideTrainers(w, Window(8, 1.2, 80), &memory);
  EXPECT_EQ(d.action, Action::kGrow);
  EXPECT_EQ(d.replicas, 16u);
  d = DecideTrainers(w, Window(8, 1.3, 80), &memory);
  EXPECT_EQ(d.replicas, 11u);  // 1 + 0.45·7/0.3 = 11.5
  // No room: hold, saying why.
  memory = AutoscaleMemory();
  d = DecideTrainers(w, Window(8, 1.45, 80), &memory);
  EXPECT_EQ(d.action, Action::kHold);
  EXPECT_EQ(d.replicas, 8u);
  EXPECT_STREQ(d.Reason(), "Holding");
  EXPECT_EQ(d.message, "Gap 1.45 is near maxGap 1.50: holding at 8 trainers");
}

TEST(AutoscalePolicyTest, AGapAboveTheBoundShrinksToWhereItProjectsUnder) {
  const WorkersSpec w = Workers(2, 32, 64);
  AutoscaleMemory memory;
  memory.grown_from = 16;
  // G − 1 = 1.0 at 32: n − 1 <= 0.5·31 → 16.
  AutoscaleDecision d = DecideTrainers(w, Window(32, 2.0, 300), &memory);
  EXPECT_EQ(d.action, Action::kShrink);
  EXPECT_EQ(d.replicas, 16u);
  EXPECT_STREQ(d.Reason(), "ScaledDown");
  EXPECT_EQ(d.message, "Gap 2.00 is above maxGap 1.50 (projected 1.48 at 16): 32 -> 16 trainers");
  EXPECT_EQ(memory.grown_from, 0u);
  // Never below the floor, and at least one fewer.
  d = DecideTrainers(w, Window(32, 100, 300), &memory);
  EXPECT_EQ(d.replicas, 2u);
  d = DecideTrainers(w, Window(32, 1.52, 300), &memory);
  EXPECT_EQ(d.replicas, 30u);  // 1 + 0.5·31/0.52 = 30.8
  d = DecideTrainers(w, Window(32, 1.501, 300), &memory);
  EXPECT_EQ(d.replicas, 31u);
  // At the floor: nothing to shrink.
  d = DecideTrainers(w, Window(2, 3.0, 20), &memory);
  EXPECT_EQ(d.action, Action::kHold);
  EXPECT_EQ(d.replicas, 2u);
}

TEST(AutoscalePolicyTest, PendingOrPreemptedTrainersHoldTheNumber) {
  const WorkersSpec w = Workers(1, 8, 64);
  AutoscaleMemory memory;
  memory.grown_from = 4;
  memory.rate_before = 40;
  AutoscaleWindow window = Window(8, 1.05, 41);  // would be an unprofitable growth
  window.running = 6;
  AutoscaleDecision d = DecideTrainers(w, window, &memory);
  EXPECT_EQ(d.action, Action::kHold);
  EXPECT_EQ(d.message,
            "2 of 8 trainers not running (Pending or being replaced): holding at 8 trainers");
  // The growth is judged on a later, clean window, not this one.
  EXPECT_EQ(memory.grown_from, 4u);
  window.running = 8;
  window.preemptions = 1;
  d = DecideTrainers(w, window, &memory);
  EXPECT_EQ(d.message, "1 trainer preempted in the window: holding at 8 trainers");
  // A Gap above the bound still shrinks: the trainers that run are too stale.
  window.gap_sum = 300;
  d = DecideTrainers(w, window, &memory);
  EXPECT_EQ(d.action, Action::kShrink);
}

TEST(AutoscalePolicyTest, AGrowthThatAddsTooFewUpdatesIsUndoneAndNotTriedAgain) {
  const WorkersSpec w = Workers(1, 8, 64);
  AutoscaleMemory memory;
  memory.grown_from = 4;
  memory.rate_before = 40;  // 10 a trainer
  // 8 trainers: 52 updates/s, 3 per added trainer < 0.5 · 10.
  AutoscaleDecision d = DecideTrainers(w, Window(8, 1.05, 52), &memory);
  EXPECT_EQ(d.action, Action::kShrink);
  EXPECT_EQ(d.replicas, 4u);
  EXPECT_EQ(d.message,
            "8 trainers gave 52.0 updates/s, 4 gave 40.0: 3.00 per added trainer, under minGain "
            "0.50 of 10.00: 8 -> 4 trainers");
  EXPECT_EQ(memory.unprofitable, 8u);
  // Back at 4 with room: grows, but to 7 at most.
  d = DecideTrainers(w, Window(4, 1.01, 40), &memory);
  EXPECT_EQ(d.action, Action::kGrow);
  EXPECT_EQ(d.replicas, 7u);
  // 7 paid: kept; then it holds below 8.
  d = DecideTrainers(w, Window(7, 1.02, 68), &memory);
  EXPECT_EQ(d.action, Action::kHold);
  EXPECT_EQ(d.message, "8 trainers did not add enough updates/s: holding at 7 trainers");
}

TEST(AutoscalePolicyTest, AProfitableGrowthIsKept) {
  const WorkersSpec w = Workers(1, 8, 64);
  AutoscaleMemory memory;
  memory.grown_from = 4;
  memory.rate_before = 40;
  // 75 updates/s: 8.75 per added trainer >= 5. Room: it grows again.
  AutoscaleDecision d = DecideTrainers(w, Window(8, 1.05, 75), &memory);
  EXPECT_EQ(d.action, Action::kGrow);
  EXPECT_EQ(d.replicas, 16u);
  EXPECT_EQ(memory.grown_from, 8u);
  EXPECT_DOUBLE_EQ(memory.rate_before, 75);
  EXPECT_EQ(memory.unprofitable, 0u);
}

TEST(AutoscalePolicyTest, StaysInTheRange) {
  AutoscaleMemory memory;
  // At the ceiling with room: hold.
  AutoscaleDecision d = DecideTrainers(Workers(1, 64, 64), Window(64, 1.0, 640), &memory);
  EXPECT_EQ(d.action, Action::kHold);
  EXPECT_EQ(d.message, "at maxReplicas 64: holding at 64 trainers");
  // Doubling stops at the ceiling.
  d = DecideTrainers(Workers(1, 40, 64), Window(40, 1.0, 400), &memory);
  EXPECT_EQ(d.replicas, 64u);
  // minReplicas 0 means replicas: the floor is the starting number.
  WorkersSpec w = Workers(0, 8, 64);
  d = DecideTrainers(w, Window(8, 9.0, 80), &memory);
  EXPECT_EQ(d.action, Action::kHold);
  EXPECT_EQ(d.replicas, 8u);
  // Scaled by hand outside the range: back into it.
  d = DecideTrainers(Workers(2, 8, 16), Window(20, 1.0, 80), &memory);
  EXPECT_EQ(d.action, Action::kShrink);
  EXPECT_EQ(d.replicas, 16u);
  EXPECT_EQ(d.message, "outside [2, 16]: 20 -> 16 trainers");
}

TEST(AutoscalePolicyTest, NoPushMeasuredHolds) {
  AutoscaleMemory memory;
  AutoscaleWindow window = Window(4, 1.0, 0);
  window.gap_count = 0;
  window.gap_sum = 0;
  AutoscaleDecision d = DecideTrainers(Workers(1, 4, 64), window, &memory);
  EXPECT_EQ(d.action, Action::kHold);
  EXPECT_EQ(d.message, "no push measured in the last 60 s: holding at 4 trainers");
}

}  // namespace
}  // namespace gaptrain
