#include "services/master/shard_checkpoints.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>

namespace gaptrain {
namespace {

bool IsDir(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string ShardDir(const std::string& dir, uint32_t shard) {
  return dir + "/shard-" + std::to_string(shard);
}

}  // namespace

bool IsShardedCheckpointDir(const std::string& dir) {
  return CheckpointDirectory(dir, 1).List().empty() && IsDir(ShardDir(dir, 0));
}

Status ReadShardCheckpoints(const std::string& dir, std::unique_ptr<ParameterStore>* store,
                            CheckpointMeta* meta, std::vector<std::string>* paths,
                            std::vector<std::string>* skipped) {
  std::unique_ptr<ParameterStore> whole;
  CheckpointMeta first;
  std::vector<std::string> read;
  uint32_t count = 1;
  uint64_t version = UINT64_MAX;
  for (uint32_t i = 0; i < count; ++i) {
    const std::string shard_dir = ShardDir(dir, i);
    std::unique_ptr<ParameterStore> part;
    CheckpointMeta part_meta;
    std::string path;
    Status s = CheckpointDirectory(shard_dir, 1).RestoreNewest(&part, &part_meta, &path, skipped);
    if (!s.ok()) return Status(s.code(), shard_dir + ": " + s.message());
    const ParameterShard& shard = part_meta.shard;
    if (i == 0) {
      first = part_meta;
      count = std::max<uint32_t>(shard.count, 1);
      whole = std::make_unique<ParameterStore>(first.model_layout);
    } else if (part_meta.model_layout != first.model_layout ||
               part_meta.model_buffers.DifferenceFrom(first.model_buffers) != "") {
      return Status::FailedPrecondition(path + " holds another model than " + read[0]);
    }
    if (shard.index != i || std::max<uint32_t>(shard.count, 1) != count) {
      return Status::FailedPrecondition(path + " holds shard " + std::to_string(shard.index) +
                                        " of " + std::to_string(shard.count) + ", expected " +
                                        std::to_string(i) + " of " + std::to_string(count));
    }
    std::memcpy(whole->params() + shard.begin, part->params(), shard.size() * sizeof(float));
    version = std::min(version, part->version());
    read.push_back(path);
  }
  if (IsDir(ShardDir(dir, count))) {
    return Status::FailedPrecondition(ShardDir(dir, count) + " exists, but " + read[0] +
                                      " says the model has " + std::to_string(count) +
                                      " shards");
  }
  whole->set_version(version);
  CheckpointMeta joined = first;  // shard 0's: the job, its run, the module's buffers
  joined.shard = ParameterShard{0, 1, 0, first.model_layout.size()};
  joined.buffer_layout = first.model_buffers;
  *store = std::move(whole);
  *meta = std::move(joined);
  *paths = std::move(read);
  return Status::OK();
}

}  // namespace gaptrain
