#include "services/engine/learning_rate_schedule.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace gaptrain {
namespace {

using Code = Status::Code;

// The message names the field: in the C++ spelling, or as the manifest
// spells it (spec.training.optimizer: learningRate, warmupEpochs,
// decay.atFractions, decay.factor; the job length is epochs/maxUpdates).
bool NamesField(const std::string& message, const std::vector<std::string>& names) {
  for (const std::string& n : names) {
    if (message.find(n) != std::string::npos) return true;
  }
  return false;
}

TEST(LearningRateScheduleTest, DefaultIsConstantPointOne) {
  LearningRateSchedule schedule;
  for (uint64_t u : {0ull, 1ull, 17ull, 1000000ull}) EXPECT_DOUBLE_EQ(schedule.At(u), 0.1);
  EXPECT_TRUE(ScheduleConfig().Validate().ok());
}

TEST(LearningRateScheduleTest, Constant) {
  ScheduleConfig c;
  c.learning_rate = 0.05;
  ASSERT_TRUE(c.Validate().ok());
  LearningRateSchedule schedule(c);
  EXPECT_DOUBLE_EQ(schedule.At(0), 0.05);
  EXPECT_DOUBLE_EQ(schedule.At(123456), 0.05);
  EXPECT_DOUBLE_EQ(schedule.config().learning_rate, 0.05);
}

TEST(LearningRateScheduleTest, LinearWarmupFromFactorToFull) {
  ScheduleConfig c;
  c.learning_rate = 0.1;
  c.warmup_updates = 100;
  c.warmup_start_factor = 0.25;  // 1/N with N = 4
  ASSERT_TRUE(c.Validate().ok());
  LearningRateSchedule schedule(c);
  EXPECT_NEAR(schedule.At(0), 0.025, 1e-12);
  for (uint64_t u = 0; u < 100; ++u) {
    const double expected = 0.1 * (0.25 + 0.75 * static_cast<double>(u) / 100.0);
    ASSERT_NEAR(schedule.At(u), expected, 1e-12) << "update " << u;
  }
  EXPECT_NEAR(schedule.At(50), 0.0625, 1e-12);
  EXPECT_DOUBLE_EQ(schedule.At(100), 0.1);
  EXPECT_DOUBLE_EQ(schedule.At(101), 0.1);
  EXPECT_DOUBLE_EQ(schedule.At(100000), 0.1);
  // Strictly increasing during warm-up.
  for (uint64_t u = 1; u <= 100; ++u) ASSERT_GT(schedule.At(u), schedule.At(u - 1)) << u;
}

TEST(LearningRateScheduleTest, WarmupFactorOneIsConstant) {
  ScheduleConfig c;
  c.learning_rate = 0.2;
  c.warmup_updates = 10;
  c.warmup_start_factor = 1.0;
  LearningRateSchedule schedule(c);
  for (uint64_t u = 0; u < 20; ++u) EXPECT_DOUBLE_EQ(schedule.At(u), 0.2) << u;
}

TEST(LearningRateScheduleTest, StepDecayAtFractions) {
  ScheduleConfig c;
  c.learning_rate = 0.1;
  c.decay_at_fractions = {0.5, 0.75};
  c.decay_factor = 0.1;
  c.total_updates = 200;
  ASSERT_TRUE(c.Validate().ok());
  LearningRateSchedule schedule(c);
  EXPECT_DOUBLE_EQ(schedule.At(0), 0.1);
  EXPECT_DOUBLE_EQ(schedule.At(99), 0.1);
  EXPECT_NEAR(schedule.At(100), 0.01, 1e-15);  // 50% of 200
  EXPECT_NEAR(schedule.At(101), 0.01, 1e-15);
  EXPECT_NEAR(schedule.At(149), 0.01, 1e-15);
  EXPECT_NEAR(schedule.At(150), 0.001, 1e-15);  // 75% of 200
  EXPECT_NEAR(schedule.At(199), 0.001, 1e-15);
  // Past the end the last rate stays.
  EXPECT_NEAR(schedule.At(1000), 0.001, 1e-15);
}

TEST(LearningRateScheduleTest, WarmupThenDecay) {
  ScheduleConfig c;
  c.learning_rate = 0.4;
  c.warmup_updates = 10;
  c.warmup_start_factor = 0.5;
  c.decay_at_fractions = {0.6};
  c.decay_factor = 0.5;
  c.total_updates = 50;
  ASSERT_TRUE(c.Validate().ok());
  LearningRateSchedule schedule(c);
  EXPECT_NEAR(schedule.At(0), 0.2, 1e-12);
  EXPECT_NEAR(schedule.At(5), 0.3, 1e-12);
  EXPECT_NEAR(schedule.At(10), 0.4, 1e-12);
  EXPECT_NEAR(schedule.At(29), 0.4, 1e-12);
  EXPECT_NEAR(schedule.At(30), 0.2, 1e-12);
  EXPECT_NEAR(schedule.At(49), 0.2, 1e-12);
}

TEST(LearningRateScheduleTest, IsAPureFunction) {
  ScheduleConfig c;
  c.learning_rate = 0.1;
  c.warmup_updates = 7;
  c.warmup_start_factor = 0.125;
  c.decay_at_fractions = {0.3, 0.9};
  c.total_updates = 40;
  LearningRateSchedule schedule(c);
  std::vector<double> first;
  for (uint64_t u = 0; u < 60; ++u) first.push_back(schedule.At(u));
  for (uint64_t u = 60; u-- > 0;) EXPECT_EQ(schedule.At(u), first[u]) << u;
}

// ------------------------------------------------------------ Validate

struct BadCase {
  const char* what;
  ScheduleConfig config;
  std::vector<std::string> names;
};

ScheduleConfig Valid() {
  ScheduleConfig c;
  c.learning_rate = 0.1;
  c.warmup_updates = 10;
  c.warmup_start_factor = 0.25;
  c.decay_at_fractions = {0.5, 0.75};
  c.decay_factor = 0.1;
  c.total_updates = 100;
  return c;
}

TEST(LearningRateScheduleTest, ValidConfigPasses) { EXPECT_TRUE(Valid().Validate().ok()); }

TEST(LearningRateScheduleTest, ValidateNamesTheField) {
  std::vector<BadCase> cases;
  {
    ScheduleConfig c = Valid();
    c.learning_rate = -0.1;
    cases.push_back({"negative learning rate", c, {"learning_rate", "learningRate"}});
  }
  {
    ScheduleConfig c = Valid();
    c.learning_rate = std::numeric_limits<double>::quiet_NaN();
    cases.push_back({"NaN learning rate", c, {"learning_rate", "learningRate"}});
  }
  {
    ScheduleConfig c = Valid();
    c.learning_rate = std::numeric_limits<double>::infinity();
    cases.push_back({"infinite learning rate", c, {"learning_rate", "learningRate"}});
  }
  {
    ScheduleConfig c = Valid();
    c.warmup_start_factor = -0.5;
    cases.push_back({"negative warm-up factor", c,
                     {"warmup_start_factor", "warmupStartFactor", "warmupEpochs"}});
  }
  {
    ScheduleConfig c = Valid();
    c.decay_at_fractions = {0.75, 0.5};
    cases.push_back({"decreasing fractions", c, {"decay_at_fractions", "atFractions"}});
  }
  {
    ScheduleConfig c = Valid();
    c.decay_at_fractions = {0.5, 0.5};
    cases.push_back({"repeated fraction", c, {"decay_at_fractions", "atFractions"}});
  }
  {
    ScheduleConfig c = Valid();
    c.decay_at_fractions = {1.5};
    cases.push_back({"fraction above 1", c, {"decay_at_fractions", "atFractions"}});
  }
  {
    ScheduleConfig c = Valid();
    c.decay_at_fractions = {0.0};
    cases.push_back({"fraction 0", c, {"decay_at_fractions", "atFractions"}});
  }
  {
    ScheduleConfig c = Valid();
    c.decay_at_fractions = {-0.2, 0.5};
    cases.push_back({"negative fraction", c, {"decay_at_fractions", "atFractions"}});
  }
  {
    ScheduleConfig c = Valid();
    c.decay_at_fractions = {1.0};
    cases.push_back({"fraction 1", c, {"decay_at_fractions", "atFractions"}});
  }
  {
    ScheduleConfig c = Valid();
    c.decay_factor = -0.1;
    cases.push_back({"negative decay factor", c, {"decay_factor", "decay.factor"}});
  }
  {
    ScheduleConfig c = Valid();
    c.total_updates = 0;
    cases.push_back({"fractions without total", c,
                     {"total_updates", "totalUpdates", "maxUpdates", "epochs"}});
  }
  for (const BadCase& bad : cases) {
    SCOPED_TRACE(bad.what);
    Status s = bad.config.Validate();
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
    EXPECT_TRUE(NamesField(s.message(), bad.names))
        << "message does not name " << bad.names[0] << ": " << s.message();
  }
}

TEST(LearningRateScheduleTest, TotalUpdatesNotNeededWithoutDecay) {
  ScheduleConfig c;
  c.learning_rate = 0.1;
  c.warmup_updates = 5;
  c.warmup_start_factor = 0.5;
  c.total_updates = 0;
  EXPECT_TRUE(c.Validate().ok());
}

}  // namespace
}  // namespace gaptrain
