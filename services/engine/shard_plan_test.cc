#include "services/engine/shard_plan.h"

#include <gtest/gtest.h>

namespace gaptrain {
namespace {

ParameterLayout LayoutOf(const std::vector<std::pair<std::string, std::vector<int64_t>>>& ts) {
  ParameterLayout layout;
  for (const auto& [name, shape] : ts) EXPECT_TRUE(layout.Add(name, shape).ok());
  return layout;
}

std::vector<std::pair<size_t, size_t>> Ranges(const std::vector<ParameterShard>& plan) {
  std::vector<std::pair<size_t, size_t>> r;
  for (const ParameterShard& s : plan) r.emplace_back(s.begin, s.end);
  return r;
}

// LeNet-5's tensors (61,706 parameters).
ParameterLayout LeNet5() {
  return LayoutOf({{"conv1.weight", {6, 1, 5, 5}},
                   {"conv1.bias", {6}},
                   {"conv2.weight", {16, 6, 5, 5}},
                   {"conv2.bias", {16}},
                   {"fc1.weight", {120, 400}},
                   {"fc1.bias", {120}},
                   {"fc2.weight", {84, 120}},
                   {"fc2.bias", {84}},
                   {"fc3.weight", {10, 84}},
                   {"fc3.bias", {10}}});
}

TEST(ShardPlanTest, OneShardHoldsTheWholeModel) {
  std::vector<ParameterShard> plan;
  ASSERT_TRUE(PlanShards(LeNet5(), 1, &plan).ok());
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0], (ParameterShard{0, 1, 0, 61706}));
  EXPECT_TRUE(ShardLayout(LeNet5(), plan[0]) == LeNet5());
}

TEST(ShardPlanTest, ManyEqualTensorsAreKeptWhole) {
  // Eight tensors of 1000: four shards of two tensors each.
  std::vector<std::pair<std::string, std::vector<int64_t>>> ts;
  for (int i = 0; i < 8; ++i) ts.push_back({"t" + std::to_string(i), {10, 100}});
  std::vector<ParameterShard> plan;
  ASSERT_TRUE(PlanShards(LayoutOf(ts), 4, &plan).ok());
  EXPECT_EQ(Ranges(plan), (std::vector<std::pair<size_t, size_t>>{
                              {0, 2000}, {2000, 4000}, {4000, 6000}, {6000, 8000}}));
  const ParameterLayout third = ShardLayout(LayoutOf(ts), plan[2]);
  ASSERT_EQ(third.num_tensors(), 2u);
  EXPECT_EQ(third.tensors()[0].name, "t4");
  EXPECT_EQ(third.tensors()[0].shape, (std::vector<int64_t>{10, 100}));
  EXPECT_EQ(third.size(), 2000u);
}

TEST(ShardPlanTest, ALargeTensorIsCutAtTheFairShare) {
  // LeNet-5 in two: fc1.weight (48,000 of 61,706) holds the middle, no
  // tensor boundary lies within 3,856 of 30,853: the cut is inside it.
  std::vector<ParameterShard> plan;
  ASSERT_TRUE(PlanShards(LeNet5(), 2, &plan).ok());
  EXPECT_EQ(Ranges(plan),
            (std::vector<std::pair<size_t, size_t>>{{0, 30853}, {30853, 61706}}));
  const ParameterLayout first = ShardLayout(LeNet5(), plan[0]);
  const ParameterLayout second = ShardLayout(LeNet5(), plan[1]);
  EXPECT_EQ(first.size(), 30853u);
  EXPECT_EQ(second.size(), 30853u);
  // fc1.weight starts at 2,572: its first 28,281 elements are shard 0's.
  EXPECT_EQ(first.tensors().back().name, "fc1.weight[0:28281)");
  EXPECT_EQ(first.tensors().back().shape, (std::vector<int64_t>{28281}));
  EXPECT_EQ(second.tensors().front().name, "fc1.weight[28281:48000)");
  EXPECT_EQ(second.tensors()[1].name, "fc1.bias");
}

TEST(ShardPlanTest, ANearbyTensorBoundaryIsPreferredToACut) {
  // 1000 + 900 + 100: the fair cut at 1000 is a boundary; at S = 2 the
  // boundary at 1000 is exactly the ideal; with 1100 + 900 the boundary at
  // 1100 is 100 from 1000, within 1000/8 = 125: kept whole.
  std::vector<ParameterShard> plan;
  ASSERT_TRUE(PlanShards(LayoutOf({{"a", {1100}}, {"b", {900}}}), 2, &plan).ok());
  EXPECT_EQ(Ranges(plan), (std::vector<std::pair<size_t, size_t>>{{0, 1100}, {1100, 2000}}));
  // 1200 + 800: 200 away, beyond 125: cut inside a.
  ASSERT_TRUE(PlanShards(LayoutOf({{"a", {1200}}, {"b", {800}}}), 2, &plan).ok());
  EXPECT_EQ(Ranges(plan), (std::vector<std::pair<size_t, size_t>>{{0, 1000}, {1000, 2000}}));
}

TEST(ShardPlanTest, RangesTileTheModelForEveryCount) {
  const ParameterLayout lenet = LeNet5();
  for (uint32_t s = 1; s <= 64; ++s) {
    std::vector<ParameterShard> plan;
    ASSERT_TRUE(PlanShards(lenet, s, &plan).ok()) << s;
    ASSERT_EQ(plan.size(), s);
    size_t at = 0;
    size_t tensors_bytes = 0;
    for (uint32_t i = 0; i < s; ++i) {
      EXPECT_EQ(plan[i].index, i);
      EXPECT_EQ(plan[i].count, s);
      EXPECT_EQ(plan[i].begin, at) << "S=" << s << " shard " << i;
      EXPECT_GT(plan[i].end, plan[i].begin);
      EXPECT_LE(plan[i].size(), lenet.size() / s * 5 / 4 + 2) << "S=" << s << " shard " << i;
      const ParameterLayout part = ShardLayout(lenet, plan[i]);
      EXPECT_EQ(part.size(), plan[i].size());
      tensors_bytes += part.size();
      at = plan[i].end;
    }
    EXPECT_EQ(at, lenet.size());
    EXPECT_EQ(tensors_bytes, lenet.size());
  }
}

TEST(ShardPlanTest, MoreShardsThanParametersAreRefused) {
  std::vector<ParameterShard> plan;
  const Status s = PlanShards(LayoutOf({{"w", {3}}}), 4, &plan);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("3 parameters, fewer than its 4 shards"), std::string::npos)
      << s.ToString();
  EXPECT_EQ(PlanShards(LayoutOf({{"w", {3}}}), 0, &plan).code(),
            Status::Code::kInvalidArgument);
}

TEST(ShardPlanTest, AnEmptyTensorIsNamedByExactlyOneShard) {
  const ParameterLayout layout = LayoutOf({{"a", {100}}, {"empty", {0}}, {"b", {100}}});
  std::vector<ParameterShard> plan;
  ASSERT_TRUE(PlanShards(layout, 2, &plan).ok());
  int named = 0;
  for (const ParameterShard& r : plan) {
    const ParameterLayout part = ShardLayout(layout, r);
    for (const TensorSpec& t : part.tensors()) named += t.name == "empty";
  }
  EXPECT_EQ(named, 1);
}

}  // namespace
}  // namespace gaptrain
