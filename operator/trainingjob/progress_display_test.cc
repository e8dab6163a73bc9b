#include "operator/trainingjob/progress_display.h"

#include <gtest/gtest.h>

#include <limits>

namespace gaptrain {
namespace trainingjob {
namespace {

using nlohmann::json;

TEST(ProgressDisplayTest, EpochsDoneRoundDownToATenthOfTheJobsEpochs) {
  EXPECT_EQ(EpochText(2.3125, 4), "2.3/4");
  EXPECT_EQ(EpochText(0.6037333333333333, 4), "0.6/4");  // the issue's column
  EXPECT_EQ(EpochText(3.96, 4), "3.9/4");                // not "4.0/4" before it ends
  EXPECT_EQ(EpochText(4, 4), "4.0/4");
  EXPECT_EQ(EpochText(0, 10), "0.0/10");
  EXPECT_EQ(EpochText(0.3, 4), "0.3/4");  // 0.3 is 0.2999... as a double
  EXPECT_EQ(EpochText(0.7, 4), "0.7/4");
  EXPECT_EQ(EpochText(1.25, 2.5), "1.2/2.5");  // a fractional job
  EXPECT_EQ(EpochText(12.0, 1e6), "12.0/1000000");
  // Counted in maxUpdates: no total.
  EXPECT_EQ(EpochText(2.34, 0), "2.3");
  EXPECT_EQ(EpochText(-1, 4), "0.0/4");
}

TEST(ProgressDisplayTest, AccuracyIsAPercentageWithTwoDecimals) {
  EXPECT_EQ(AccuracyText(0.9845), "98.45%");
  EXPECT_EQ(AccuracyText(0.9666), "96.66%");  // the issue's column
  EXPECT_EQ(AccuracyText(0.98456), "98.46%");
  EXPECT_EQ(AccuracyText(1), "100.00%");
  EXPECT_EQ(AccuracyText(0), "0.00%");
  EXPECT_EQ(AccuracyText(0.1), "10.00%");
}

TEST(ProgressDisplayTest, GapHasTwoDecimals) {
  EXPECT_EQ(GapText(2.1723000994419266), "2.17");  // the issue's column
  EXPECT_EQ(GapText(1), "1.00");
  EXPECT_EQ(GapText(2.176), "2.18");
  EXPECT_EQ(GapText(123.456), "123.46");
}

TEST(ProgressDisplayTest, RateIsWholeFromTenOneDecimalBelow) {
  EXPECT_EQ(RateText(270.4), "270");
  EXPECT_EQ(RateText(270.5), "270");  // to nearest even, as printf does
  EXPECT_EQ(RateText(10), "10");
  EXPECT_EQ(RateText(9.96), "10");  // not "10.0"
  EXPECT_EQ(RateText(9.94), "9.9");
  EXPECT_EQ(RateText(2.5), "2.5");
  EXPECT_EQ(RateText(0), "0.0");
  EXPECT_EQ(RateText(-3), "0.0");
}

TEST(ProgressDisplayTest, EveryValueProgressHasWhileRunning) {
  const json progress = json::parse(R"j({"epoch": 2.3125, "modelVersion": 2706,
      "testAccuracy": 0.9845, "testLoss": 0.05, "meanGap": 2.1723, "meanStaleness": 2.4,
      "updatesPerSecond": 270.4})j");
  EXPECT_EQ(ProgressDisplay(progress, 4, "Running", {}),
            json::parse(R"j({"epoch": "2.3/4", "accuracy": "98.45%", "gap": "2.17",
                "updatesPerSecond": "270"})j"));
  // A job counted in maxUpdates.
  EXPECT_EQ(ProgressDisplay(progress, 0, "Running", {})["epoch"], "2.3");
}

TEST(ProgressDisplayTest, TheRateOnlyWhileRunning) {
  const json progress = json::parse(R"j({"epoch": 4, "testAccuracy": 0.99,
      "updatesPerSecond": 270.4})j");
  for (const char* phase : {"Succeeded", "Failed", "Suspended", "Pending", "Restarting", ""}) {
    EXPECT_EQ(ProgressDisplay(progress, 4, phase, {}),
              json::parse(R"j({"epoch": "4.0/4", "accuracy": "99.00%"})j"))
        << phase;
  }
}

TEST(ProgressDisplayTest, MissingValuesAreLeftOut) {
  EXPECT_EQ(ProgressDisplay(json::object(), 4, "Running", {}), json::object());
  EXPECT_EQ(ProgressDisplay(json(), 4, "Running", {}), json::object());
  // Before the evaluator's first score and the master's first push.
  EXPECT_EQ(ProgressDisplay(json::parse(R"j({"epoch": 0.05, "modelVersion": 12})j"), 4,
                            "Running", {}),
            json::parse(R"j({"epoch": "0.0/4"})j"));
  // Not numbers, or not finite (JSON has no NaN; a bad write could hold one).
  json odd = json::parse(R"j({"epoch": "1.5", "testAccuracy": null, "meanGap": true})j");
  odd["updatesPerSecond"] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(ProgressDisplay(odd, 4, "Running", {}), json::object());
}

TargetSpec Target(const char* metric, double at_least, double at_most) {
  TargetSpec t;
  t.metric = metric;
  t.at_least = at_least;
  t.at_most = at_most;
  return t;
}

TEST(ProgressDisplayTest, TheTargetMetricBesideItsBound) {
  const double unset = std::numeric_limits<double>::quiet_NaN();
  const json progress = json::parse(R"j({"testAccuracy": 0.25, "testLoss": 2.9,
      "testMetrics": {"perplexity": 18.4123, "top5_accuracy": 0.875}})j");
  EXPECT_EQ(ProgressDisplay(progress, 4, "Running", Target("perplexity", unset, 20))["target"],
            "perplexity 18.41 (<= 20)");
  EXPECT_EQ(ProgressDisplay(progress, 4, "Running", Target("top5_accuracy", 0.95, unset))["target"],
            "top5_accuracy 0.875 (>= 0.95)");
  EXPECT_EQ(ProgressDisplay(progress, 4, "Running", Target("accuracy", 0.9, unset))["target"],
            "accuracy 0.25 (>= 0.9)");
  EXPECT_EQ(ProgressDisplay(progress, 4, "Running", Target("loss", unset, 0.5))["target"],
            "loss 2.9 (<= 0.5)");
  // Before an evaluation reports it: the bound alone.
  EXPECT_EQ(ProgressDisplay(progress, 4, "Running", Target("f1", 0.8, unset))["target"],
            "f1 >= 0.8");
  EXPECT_FALSE(ProgressDisplay(progress, 4, "Running", {}).contains("target"));
}

}  // namespace
}  // namespace trainingjob
}  // namespace gaptrain
