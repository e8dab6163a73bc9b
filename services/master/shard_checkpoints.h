// ShardCheckpoints: the model of a job whose θ is held by several masters
// (spec.master.shards), put back together from their checkpoints: each
// shard's newest valid one in DIR/shard-I (CheckpointDirectory), joined
// into one store of the whole model, for `gaptrain export`.
//
// What callers may rely on:
//   - IsShardedCheckpointDir(DIR) is true when DIR holds no checkpoint file
//     of its own and a shard-0 directory: the layout masters of a sharded
//     job write.
//   - ReadShardCheckpoints succeeds only when shard-0 .. shard-(S-1) each
//     hold a valid checkpoint of shard I of S of the same model, S from
//     the files (no more directories than that); the result's layout is
//     the whole model's, its parameters each shard's range in place, its
//     buffers shard 0's, its version the lowest of the shards' (every
//     shard has applied at least that many updates), and no rule state.
//     Training is asynchronous: the shards' newest checkpoints need not be
//     of one moment; each is within one checkpoint interval of its master.
//   - Errors name the shard's directory: NOT_FOUND when one has no
//     checkpoint, DATA_LOSS when none of its files is valid,
//     FAILED_PRECONDITION when the files do not make one model.

#ifndef GAPTRAIN_SERVICES_MASTER_SHARD_CHECKPOINTS_H_
#define GAPTRAIN_SERVICES_MASTER_SHARD_CHECKPOINTS_H_

#include <memory>
#include <string>
#include <vector>

#include "services/base/status.h"
#include "services/engine/parameter_store.h"
#include "services/master/checkpoint.h"

namespace gaptrain {

bool IsShardedCheckpointDir(const std::string& dir);

// *paths: the file read for each shard, in shard order; *skipped: invalid
// files passed over ("<path>: <reason>"), as RestoreNewest reports them.
Status ReadShardCheckpoints(const std::string& dir, std::unique_ptr<ParameterStore>* store,
                            CheckpointMeta* meta, std::vector<std::string>* paths,
                            std::vector<std::string>* skipped);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_MASTER_SHARD_CHECKPOINTS_H_
