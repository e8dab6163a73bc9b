#include "services/master/shard_checkpoints.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "services/engine/shard_plan.h"
#include "services/testing/test_files.h"

namespace gaptrain {
namespace {

ParameterLayout Model() {
  ParameterLayout layout;
  EXPECT_TRUE(layout.Add("fc.weight", {10, 100}).ok());
  EXPECT_TRUE(layout.Add("fc.bias", {10}).ok());
  EXPECT_TRUE(layout.Add("out.weight", {4, 10}).ok());
  return layout;
}

// Writes shard `shard.index` of the model at `version` to DIR/shard-I, its
// parameters the flat indices (so the joined model says where each came
// from).
void WriteShard(const std::string& dir, const ParameterShard& shard, uint64_t version,
                uint32_t shard_count_in_file = 0) {
  ParameterStore store(ShardLayout(Model(), shard));
  for (size_t j = 0; j < store.size(); ++j) store.params()[j] = static_cast<float>(shard.begin + j);
  store.set_version(version);
  CheckpointMeta meta;
  meta.job_name = "sharded";
  meta.rule = "asgd";
  meta.shard = shard;
  if (shard_count_in_file != 0) meta.shard.count = shard_count_in_file;
  meta.model_layout = Model();
  CheckpointDirectory checkpoints(dir + "/shard-" + std::to_string(shard.index), 3);
  std::string path;
  ASSERT_TRUE(checkpoints.Save(store, meta, &path).ok());
}

TEST(ShardCheckpointsTest, TheNewestOfEachShardAreJoinedIntoTheWholeModel) {
  const std::string dir = TestDir("joined");
  std::vector<ParameterShard> plan;
  ASSERT_TRUE(PlanShards(Model(), 3, &plan).ok());
  WriteShard(dir, plan[0], 40);
  WriteShard(dir, plan[1], 38);
  WriteShard(dir, plan[1], 44);  // newer: the one read
  WriteShard(dir, plan[2], 41);
  EXPECT_TRUE(IsShardedCheckpointDir(dir));
  EXPECT_FALSE(IsShardedCheckpointDir(dir + "/shard-0"));
  std::unique_ptr<ParameterStore> store;
  CheckpointMeta meta;
  std::vector<std::string> paths, skipped;
  const Status s = ReadShardCheckpoints(dir, &store, &meta, &paths, &skipped);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(store->layout() == Model());
  for (size_t j = 0; j < store->size(); ++j) ASSERT_EQ(store->params()[j], static_cast<float>(j));
  EXPECT_EQ(store->version(), 40u) << "the lowest of the shards' newest";
  EXPECT_EQ(meta.shard, (ParameterShard{0, 1, 0, Model().size()}));
  ASSERT_EQ(paths.size(), 3u);
  EXPECT_EQ(paths[1], dir + "/shard-1/" + CheckpointDirectory::FileName(44));
}

TEST(ShardCheckpointsTest, AMissingOrForeignShardIsNamed) {
  std::vector<ParameterShard> plan;
  ASSERT_TRUE(PlanShards(Model(), 2, &plan).ok());
  std::unique_ptr<ParameterStore> store;
  CheckpointMeta meta;
  std::vector<std::string> paths, skipped;
  {
    const std::string dir = TestDir("missing");
    WriteShard(dir, plan[0], 5);
    const Status s = ReadShardCheckpoints(dir, &store, &meta, &paths, &skipped);
    EXPECT_EQ(s.code(), Status::Code::kNotFound);
    EXPECT_NE(s.message().find(dir + "/shard-1"), std::string::npos) << s.ToString();
  }
  {
    // Shard 1's directory holds shard 0's checkpoint.
    const std::string dir = TestDir("foreign");
    WriteShard(dir, plan[0], 5);
    ParameterStore store0(ShardLayout(Model(), plan[0]));
    CheckpointMeta wrong;
    wrong.job_name = "sharded";
    wrong.rule = "asgd";
    wrong.shard = plan[0];
    wrong.model_layout = Model();
    std::string path;
    store0.set_version(9);
    ASSERT_TRUE(CheckpointDirectory(dir + "/shard-1", 3).Save(store0, wrong, &path).ok());
    const Status s = ReadShardCheckpoints(dir, &store, &meta, &paths, &skipped);
    EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
    EXPECT_NE(s.message().find("holds shard 0 of 2, expected 1 of 2"), std::string::npos)
        << s.ToString();
  }
  {
    // A third directory the files do not know of.
    const std::string dir = TestDir("extra");
    WriteShard(dir, plan[0], 5);
    WriteShard(dir, plan[1], 5);
    std::vector<ParameterShard> three;
    ASSERT_TRUE(PlanShards(Model(), 3, &three).ok());
    WriteShard(dir, three[2], 5);
    const Status s = ReadShardCheckpoints(dir, &store, &meta, &paths, &skipped);
    EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
    EXPECT_NE(s.message().find("says the model has 2 shards"), std::string::npos)
        << s.ToString();
  }
}

}  // namespace
}  // namespace gaptrain
