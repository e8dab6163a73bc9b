// Tests ParseMetricsText on prometheus-cpp style exposition text: HELP and
// TYPE comments, labels whose values hold spaces, braces and escaped quotes,
// NaN and +Inf/-Inf values, a timestamp after the value, and garbage lines
// (skipped); and MetricValue's default for an absent series.

#include "services/net/metrics_text.h"

#include <cmath>
#include <string>

#include <gtest/gtest.h>

namespace gaptrain {
namespace {

TEST(ParseMetricsTextTest, ReadsPrometheusCppOutput) {
  const std::string text =
      "# HELP gaptrain_master_pushes_total Gradient pushes by outcome\n"
      "# TYPE gaptrain_master_pushes_total counter\n"
      "gaptrain_master_pushes_total{outcome=\"applied\"} 120\n"
      "gaptrain_master_pushes_total{outcome=\"accumulated\"} 3\n"
      "# HELP gaptrain_master_model_version The model version\n"
      "# TYPE gaptrain_master_model_version gauge\n"
      "gaptrain_master_model_version 4210\n"
      "\n"
      "# TYPE gaptrain_master_staleness histogram\n"
      "gaptrain_master_staleness_bucket{le=\"0.5\"} 1.5e+03\n"
      "gaptrain_master_staleness_bucket{le=\"+Inf\"} 2000\n"
      "gaptrain_master_staleness_sum 4321.25\n"
      "gaptrain_master_staleness_count 2000\n";
  const MetricsSample sample = ParseMetricsText(text);
  // Every series and nothing else: comments are not series.
  EXPECT_EQ(sample, (MetricsSample{
                        {"gaptrain_master_pushes_total{outcome=\"applied\"}", 120},
                        {"gaptrain_master_pushes_total{outcome=\"accumulated\"}", 3},
                        {"gaptrain_master_model_version", 4210},
                        {"gaptrain_master_staleness_bucket{le=\"0.5\"}", 1500},
                        {"gaptrain_master_staleness_bucket{le=\"+Inf\"}", 2000},
                        {"gaptrain_master_staleness_sum", 4321.25},
                        {"gaptrain_master_staleness_count", 2000},
                    }));
}

TEST(ParseMetricsTextTest, LabelValuesMayHoldSpacesBracesAndEscapedQuotes) {
  const std::string text =
      "info{host=\"spot node 7\",version=\"1.2 beta\"} 1\n"
      "quoted{msg=\"say \\\"hi there\\\" }\"} 2\n"
      "backslash{path=\"C:\\\\tmp\\\\\"} 3\n"
      "two{a=\"x y\",b=\"} {\"} 4\n"
      "escaped_then_space{msg=\"\\\" x\"} 5\n";
  const MetricsSample sample = ParseMetricsText(text);
  EXPECT_EQ(sample, (MetricsSample{
                        {"info{host=\"spot node 7\",version=\"1.2 beta\"}", 1},
                        {"quoted{msg=\"say \\\"hi there\\\" }\"}", 2},
                        {"backslash{path=\"C:\\\\tmp\\\\\"}", 3},
                        {"two{a=\"x y\",b=\"} {\"}", 4},
                        {"escaped_then_space{msg=\"\\\" x\"}", 5},
                    }));
}

TEST(ParseMetricsTextTest, NaNAndInfinities) {
  const MetricsSample sample = ParseMetricsText(
      "gaptrain_master_gap NaN\n"
      "up_inf +Inf\n"
      "down_inf -Inf\n"
      "negative -2.5\n");
  ASSERT_EQ(sample.size(), 4u);
  EXPECT_TRUE(std::isnan(MetricValue(sample, "gaptrain_master_gap")));
  EXPECT_TRUE(std::isinf(MetricValue(sample, "up_inf")));
  EXPECT_GT(MetricValue(sample, "up_inf"), 0);
  EXPECT_TRUE(std::isinf(MetricValue(sample, "down_inf")));
  EXPECT_LT(MetricValue(sample, "down_inf"), 0);
  EXPECT_EQ(MetricValue(sample, "negative"), -2.5);
}

TEST(ParseMetricsTextTest, TimestampAfterTheValueIsIgnored) {
  const MetricsSample sample = ParseMetricsText(
      "requests_total{code=\"200\"} 1027 1395066363000\n"
      "plain 42 1395066363000\n");
  ASSERT_EQ(sample.size(), 2u);
  EXPECT_EQ(MetricValue(sample, "requests_total{code=\"200\"}"), 1027);
  EXPECT_EQ(MetricValue(sample, "plain"), 42);
}

TEST(ParseMetricsTextTest, GarbageLinesAreSkipped) {
  const MetricsSample sample = ParseMetricsText(
      "this line is garbage\n"
      "no_value\n"
      "no_value_after_labels{a=\"b\"}\n"
      "unterminated{a=\"b c 7\n"
      "not_a_number abc\n"
      "half_a_number 12abc\n"
      "word_starting_like_nan nanny\n"
      "  indented 5\n"
      "# comment 6\n"
      "good 8\n");
  ASSERT_EQ(sample.size(), 1u) << "only 'good' parses";
  EXPECT_EQ(MetricValue(sample, "good"), 8);
}

TEST(ParseMetricsTextTest, EmptyText) {
  EXPECT_TRUE(ParseMetricsText("").empty());
  EXPECT_TRUE(ParseMetricsText("\n\n# HELP x y\n").empty());
}

TEST(MetricValueTest, AbsentSeriesGivesTheDefault) {
  const MetricsSample sample = ParseMetricsText("present 3\nzero 0\n");
  EXPECT_EQ(MetricValue(sample, "present"), 3);
  EXPECT_EQ(MetricValue(sample, "zero", -1), 0) << "a present zero is not absent";
  EXPECT_EQ(MetricValue(sample, "absent"), 0);
  EXPECT_EQ(MetricValue(sample, "absent", -1), -1);
  EXPECT_TRUE(std::isnan(MetricValue(sample, "absent", std::nan(""))));
  // The key is exact: a series with labels is not its bare name.
  const MetricsSample labelled = ParseMetricsText("m{a=\"1\"} 5\n");
  EXPECT_EQ(MetricValue(labelled, "m", -1), -1);
  EXPECT_EQ(MetricValue(labelled, "m{a=\"1\"}", -1), 5);
}

}  // namespace
}  // namespace gaptrain
