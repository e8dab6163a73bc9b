// Tests how AvailableCpus chooses: the limit (cgroup quota) first, then the
// CPU request the operator hands over, then the affinity mask, never more
// than the mask and never less than 1.

#include "services/base/available_cpus.h"

#include <gtest/gtest.h>

namespace gaptrain {
namespace {

TEST(ChooseCpusTest, TheLimitWins) {
  EXPECT_EQ(ChooseCpus(2, "500", 16), 2);
  EXPECT_EQ(ChooseCpus(4, "", 16), 4);
  EXPECT_EQ(ChooseCpus(32, "", 16), 16) << "never more than the mask allows";
}

TEST(ChooseCpusTest, ARequestWithoutALimitIsRoundedUp) {
  EXPECT_EQ(ChooseCpus(0, "500", 16), 1);
  EXPECT_EQ(ChooseCpus(0, "1000", 16), 1);
  EXPECT_EQ(ChooseCpus(0, "1001", 16), 2);
  EXPECT_EQ(ChooseCpus(0, "2500", 16), 3);
  EXPECT_EQ(ChooseCpus(0, "64000", 16), 16) << "never more than the mask allows";
}

TEST(ChooseCpusTest, NoUsableRequestMeansTheMask) {
  for (const char* request : {"", "0", "-500", "1.5", "500m", "abc", "99999999999999"}) {
    EXPECT_EQ(ChooseCpus(0, request, 8), 8) << request;
  }
  EXPECT_EQ(ChooseCpus(0, "", 0), 1) << "never less than 1";
}

}  // namespace
}  // namespace gaptrain
