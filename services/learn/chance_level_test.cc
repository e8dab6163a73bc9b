#include "services/learn/chance_level.h"

#include <cmath>
#include <limits>
#include <string>

#include <gtest/gtest.h>

namespace gaptrain {
namespace {

// The README job's dead model: version 538, accuracy 0.1135, loss 2.3029.
TEST(ChanceLevelTest, ADeadMnistModelIsAtChance) {
  EXPECT_TRUE(AtChanceLevel(0.1135, 2.3029, 10));
  EXPECT_TRUE(AtChanceLevel(0.1, std::log(10.0), 10));
}

TEST(ChanceLevelTest, TrainedOrRecoveringModelsAreNot) {
  EXPECT_FALSE(AtChanceLevel(0.9904, 0.0284, 10));  // the README job, trained
  EXPECT_FALSE(AtChanceLevel(0.4679, 1.7743, 10));  // a dead model coming back
  // Loss near ln 10 but accuracy well above chance: not a constant output.
  EXPECT_FALSE(AtChanceLevel(0.35, 2.30, 10));
  // Chance accuracy with a loss far from ln 10: a diverging model, not a
  // uniform one (its loss says so on its own).
  EXPECT_FALSE(AtChanceLevel(0.1, 9.0, 10));
}

TEST(ChanceLevelTest, TheBandIsTwoPercentOfLnK) {
  const double ln10 = std::log(10.0);
  EXPECT_TRUE(AtChanceLevel(0.1, ln10 * 1.019, 10));
  EXPECT_FALSE(AtChanceLevel(0.1, ln10 * 1.021, 10));
  EXPECT_TRUE(AtChanceLevel(0.1, ln10 * 0.981, 10));
  EXPECT_FALSE(AtChanceLevel(0.1, ln10 * 0.979, 10));
  EXPECT_TRUE(AtChanceLevel(0.2, ln10, 10));
  EXPECT_FALSE(AtChanceLevel(0.21, ln10, 10));
  EXPECT_TRUE(AtChanceLevel(0.5, std::log(2.0), 2));
}

TEST(ChanceLevelTest, BadInputsAreNeverChance) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_FALSE(AtChanceLevel(nan, 2.3026, 10));
  EXPECT_FALSE(AtChanceLevel(0.1, nan, 10));
  EXPECT_FALSE(AtChanceLevel(0.1, inf, 10));
  EXPECT_FALSE(AtChanceLevel(1.0, 0.0, 1));
  EXPECT_FALSE(AtChanceLevel(0.1, 2.3026, 0));
  EXPECT_FALSE(AtChanceLevel(0.1, 2.3026, -10));
}

TEST(ChanceLevelTest, TheAdviceNamesTheField) {
  EXPECT_NE(std::string(ChanceLevelAdvice()).find("spec.training.optimizer.learningRate"),
            std::string::npos);
}

}  // namespace
}  // namespace gaptrain
