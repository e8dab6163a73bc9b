#include "cli/simulator/report.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

namespace gaptrain {
namespace {

std::string TempPath(const std::string& name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
}

RunResult MakeResult(const std::string& rule, uint32_t n, uint64_t seed, double accuracy,
                     bool diverged) {
  RunResult r;
  r.run.rule = rule;
  r.run.workers = n;
  r.run.learning_rate = 0.05;
  r.run.momentum = 0.9;
  r.run.seed = seed;
  r.diverged = diverged;
  for (int i = 1; i <= 3; ++i) {
    EvalPoint p;
    p.virtual_time = 10.5 * i;
    p.updates = 100 * i;
    p.epoch = i;
    p.accuracy = accuracy * i / 3;
    p.loss = 1.0 / i;
    p.mean_staleness = n - 1;
    p.mean_gap = 2.5;
    p.mean_penalty = 0.4;
    r.points.push_back(p);
  }
  return r;
}

TEST(ReportTest, CsvRoundTripsAndTheTableSummarisesSeeds) {
  std::vector<RunResult> results = {
      MakeResult("gap-aware", 8, 1, 0.9, false), MakeResult("gap-aware", 8, 2, 0.8, false),
      MakeResult("none", 8, 1, 0.1, true), MakeResult("none", 8, 2, 0.5, false)};
  const std::string path = TempPath("results.csv");
  ASSERT_TRUE(WriteResultsCsv(path, results).ok());
  std::vector<RunResult> back;
  Status s = ReadResultsCsv(path, &back);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(back.size(), 4u);
  EXPECT_EQ(back[1].run.seed, 2u);
  EXPECT_EQ(back[2].diverged, true);
  ASSERT_EQ(back[0].points.size(), 3u);
  EXPECT_DOUBLE_EQ(back[0].points[2].accuracy, 0.9);
  EXPECT_DOUBLE_EQ(back[0].points[1].virtual_time, 21);
  EXPECT_EQ(back[3].points[2].updates, 300u);

  const std::string table = SummaryTable(back);
  EXPECT_NE(table.find("| gap-aware lr=0.05 m=0.9 | 85.00 ± 7.07 |"), std::string::npos) << table;
  EXPECT_NE(table.find("| none lr=0.05 m=0.9 | diverged (1/2) |"), std::string::npos) << table;
}

// The autoscaled run (workers 0) is the column N=auto, after every fixed
// N; its live workers round-trip; the time-to-target table says when each
// configuration first reached the target, or that it never did.
TEST(ReportTest, AutoscaledRunsTimeToTargetAndScaleChanges) {
  RunResult fixed = MakeResult("gap-aware-dana", 4, 1, 0.9, false);
  RunResult autoscaled = MakeResult("gap-aware-dana", 0, 1, 0.6, false);
  autoscaled.points[2].live_workers = 16;
  autoscaled.scale_changes = {{10, 4, 8, "Gap 1.10 leaves room: 4 -> 8 trainers"}};
  const std::string path = TempPath("auto.csv");
  ASSERT_TRUE(WriteResultsCsv(path, {fixed, autoscaled}).ok());
  std::vector<RunResult> back;
  ASSERT_TRUE(ReadResultsCsv(path, &back).ok());
  ASSERT_EQ(back.size(), 2u);
  EXPECT_TRUE(back[1].run.autoscale());
  EXPECT_EQ(back[1].points[2].live_workers, 16u);

  const std::string table = SummaryTable(back);
  EXPECT_NE(table.find("| configuration | N=4 | N=auto |"), std::string::npos) << table;
  // Accuracy 0.3, 0.6, 0.9 at times 10.5, 21, 31.5 (fixed); auto ends at 0.6.
  const std::string times = TimeToTargetTable(back, 0.55);
  EXPECT_NE(times.find("Virtual time to reach 55.00% test accuracy"), std::string::npos);
  EXPECT_NE(times.find("| gap-aware-dana lr=0.05 m=0.9 | 21 ± 0 | 32 ± 0 |"), std::string::npos)
      << times;
  EXPECT_NE(TimeToTargetTable(back, 0.7).find("| 32 ± 0 | never (1/1) |"), std::string::npos);
  EXPECT_EQ(ScaleChangesText({autoscaled}),
            "- gap-aware-dana N=auto lr=0.05 m=0.9 seed=1: 1 changes\n"
            "  - t=10: Gap 1.10 leaves room: 4 -> 8 trainers\n");
  EXPECT_EQ(ScaleChangesText({fixed}), "");
}

TEST(ReportTest, MalformedCsvIsAClearError) {
  const std::string path = TempPath("bad.csv");
  std::ofstream(path) << "header\ngap-aware,8,0.05\n";
  std::vector<RunResult> back;
  Status s = ReadResultsCsv(path, &back);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("line 2 has 3 fields"), std::string::npos) << s.message();
  std::ofstream(path) << "header\ngap-aware,8,x,0.9,0,1,0,1,1,1,1,1,1,1,1\n";
  EXPECT_NE(ReadResultsCsv(path, &back).message().find("not a number"), std::string::npos);
  EXPECT_EQ(ReadResultsCsv(TempPath("missing.csv"), &back).code(), Status::Code::kNotFound);
}

}  // namespace
}  // namespace gaptrain
