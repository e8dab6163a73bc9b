#include "services/base/backoff.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace gaptrain {
namespace {

using std::chrono::milliseconds;

Backoff::Options Options(int initial_ms, int max_ms, double multiplier, double jitter) {
  Backoff::Options o;
  o.initial = milliseconds(initial_ms);
  o.max = milliseconds(max_ms);
  o.multiplier = multiplier;
  o.jitter = jitter;
  return o;
}

std::vector<int64_t> Delays(Backoff* b, int n) {
  std::vector<int64_t> out;
  for (int i = 0; i < n; ++i) out.push_back(b->Next().count());
  return out;
}

TEST(BackoffTest, WithoutJitterDoublesUpToTheCap) {
  Backoff b(Options(100, 1000, 2, 0), 1);
  EXPECT_EQ(Delays(&b, 7), (std::vector<int64_t>{100, 200, 400, 800, 1000, 1000, 1000}));
  EXPECT_EQ(b.failures(), 7);
  b.Reset();
  EXPECT_EQ(b.Next().count(), 100);
}

TEST(BackoffTest, JitterStaysWithinItsBandAndIsDeterministic) {
  const Backoff::Options o = Options(100, 5000, 2, 0.5);
  Backoff a(o, 42), again(o, 42), other(o, 43);
  const std::vector<int64_t> da = Delays(&a, 40);
  EXPECT_EQ(da, Delays(&again, 40));
  EXPECT_NE(da, Delays(&other, 40));
  double base = 100;
  for (int64_t d : da) {
    EXPECT_GE(d, static_cast<int64_t>(base * 0.5) - 1);
    EXPECT_LE(d, static_cast<int64_t>(base));
    base = std::min(base * 2, 5000.0);
  }
}

TEST(BackoffTest, FullJitterCanReachZeroButNeverExceedsTheCap) {
  Backoff b(Options(10, 80, 3, 1), 7);
  EXPECT_LE(b.Next().count(), 10);
  EXPECT_LE(b.Next().count(), 30);
  // Capped from the third delay on: uniform over (0, 80], so with full
  // jitter 1000 draws reach both ends (each about 6 times) and average 40.
  int64_t lowest = 80, highest = 0, sum = 0;
  for (int i = 0; i < 1000; ++i) {
    const int64_t d = b.Next().count();
    ASSERT_GE(d, 0);
    ASSERT_LE(d, 80);
    lowest = std::min(lowest, d);
    highest = std::max(highest, d);
    sum += d;
  }
  EXPECT_EQ(lowest, 0) << "full jitter can reach zero";
  EXPECT_EQ(highest, 80);
  EXPECT_NEAR(sum / 1000.0, 40.0, 3.0);
}

TEST(BackoffTest, ManyFailuresDoNotOverflow) {
  Backoff b(Options(1, 60000, 10, 0), 1);
  for (int i = 0; i < 10000; ++i) b.Next();
  EXPECT_EQ(b.Next().count(), 60000);
}

TEST(BackoffTest, ValidateNamesTheField) {
  Backoff::Options o;
  EXPECT_TRUE(Backoff::Validate(o).ok());
  o.multiplier = 0.5;
  EXPECT_NE(Backoff::Validate(o).message().find("multiplier"), std::string::npos);
  o = Backoff::Options();
  o.jitter = 1.5;
  EXPECT_NE(Backoff::Validate(o).message().find("jitter"), std::string::npos);
  o = Backoff::Options();
  o.max = milliseconds(1);
  EXPECT_NE(Backoff::Validate(o).message().find("max"), std::string::npos);
}

}  // namespace
}  // namespace gaptrain
