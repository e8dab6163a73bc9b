// Checkpoints: a ParameterStore (parameters θ, version t, the rule's named
// state buffers and scalars) plus a little job metadata, in one file that is
// written atomically and verified by CRC before it is used. The version is
// also the schedule position: the learning-rate schedule is a pure function
// of t. CheckpointDirectory keeps the last K files of a job and finds the
// newest valid one on start. The master service decides when to save (timer,
// SIGTERM, request); this file only knows how.
//
// File format, version 1. Integers are little-endian; buffers hold the
// store's raw memory (little-endian IEEE-754 binary32, or bfloat16: the top
// 16 bits of a binary32), so files move between little-endian hosts only.
//
//   offset      bytes  field
//   0           8      magic 89 47 54 43 4B 50 54 0A ("\x89GTCKPT\n")
//   8           4      format version, uint32 = 1
//   12          4      header length H, uint32, at most 64 MiB
//   16          8      data length D, uint64
//   24          H      header: proto::CheckpointHeader (proto/gaptrain.proto)
//                      in protobuf binary form: job name, rule, version,
//                      creation time, layout, scalars, member workers, and
//                      one descriptor (name, dtype, byte length) per state
//                      buffer in file order
//   24+H        D      data: the parameters (P float32 values, 4P bytes),
//                      then each state buffer's bytes in descriptor order,
//                      then the module's buffers (layout.buffers packed as
//                      services/engine/buffer_layout.h says, B bytes =
//                      header.model_buffer_bytes, 0 or the layout's size);
//                      D = 4P + sum of the descriptors' byte lengths + B
//   24+H+D      4      CRC-32 (zlib crc32_z, initial value 0) of bytes
//                      [0, 24+H+D), uint32
//   28+H+D      8      end magic 0A 54 50 4B 43 54 47 89 ("\nTPKCTG\x89")
//
// The file is exactly 36 + H + D bytes. A reader checks the magics, the
// format version and the lengths against the file size before it allocates
// anything, allocates at most what the file holds, and hands nothing out
// unless the CRC matches. A descriptor's byte length must be P times its
// dtype's size (P > 0), names are unique, and the layout must rebuild.

#ifndef GAPTRAIN_SERVICES_MASTER_CHECKPOINT_H_
#define GAPTRAIN_SERVICES_MASTER_CHECKPOINT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "services/base/status.h"
#include "services/engine/buffer_layout.h"
#include "services/engine/parameter_store.h"
#include "services/engine/shard_plan.h"

namespace gaptrain {

// What a checkpoint records beside the store.
struct CheckpointMeta {
  std::string job_name;
  std::string rule;  // RuleKindName() of the job's rule, e.g. "gap-aware"
  uint64_t created_unix_ms = 0;
  // Members when the checkpoint was taken, ascending. Their per-worker
  // state is in the store as "worker/<id>/...".
  std::vector<WorkerId> workers;
  // The master run that wrote it (MasterIncarnation.id); 0 in files from
  // before runs were numbered.
  uint64_t incarnation = 0;
  // The module's buffers (BatchNorm's statistics): their layout, their
  // values packed (buffer_layout.bytes() bytes; empty when a file has none,
  // as files from before buffers were kept: start from the model's own),
  // and how many trainers' sends the values hold (ModelBuffers).
  BufferLayout buffer_layout;
  std::string buffer_values;
  uint64_t buffer_merges = 0;
  // spec.master.shards: the part of θ the store holds (its layout is
  // ShardLayout(model_layout, shard)) and the whole model's layouts; the
  // module's buffers are shard 0's. A file of the whole model reads as
  // shard 0 of 1 with the store's and the buffers' layouts; written so
  // when shard.count <= 1.
  ParameterShard shard;
  ParameterLayout model_layout;
  BufferLayout model_buffers;
};

// Writes `store` and `meta` to `path` with an AtomicFile
// (services/base/atomic_file.h): to path + ".tmp" first, fsync'd, then
// renamed over `path`, then the directory fsync'd, so `path` holds either
// its old content or the complete new file. Buffers are streamed from the
// store (no copy of the model is made). On error the temp file is removed
// and the message names the path and the OS error: a missing directory is
// NOT_FOUND, ENOSPC RESOURCE_EXHAUSTED, EACCES PERMISSION_DENIED, others
// UNAVAILABLE; a store the format cannot hold (no parameters, a name that
// is not UTF-8) INVALID_ARGUMENT. If only the final directory fsync fails,
// `path` already holds the new file.
Status WriteCheckpoint(const ParameterStore& store, const CheckpointMeta& meta,
                       const std::string& path);

// Reads and verifies the checkpoint at `path`. A torn (truncated), corrupt
// or foreign file is DATA_LOSS with a message "<path>: <what is wrong>"; a
// missing file NOT_FOUND; other OS errors as for WriteCheckpoint. On error
// *store and *meta are unchanged. `meta` may be nullptr.
Status ReadCheckpoint(const std::string& path, std::unique_ptr<ParameterStore>* store,
                      CheckpointMeta* meta);

// The checkpoints of one job: files <dir>/ckpt-<version, 20 digits>.gtc.
// Other files in the directory are never read or removed, except stale
// ckpt-<20 digits>.gtc.tmp files left by a crash, which Save removes.
// One CheckpointDirectory (one process) per directory; not thread-safe.
class CheckpointDirectory {
 public:
  // Keeps the newest `keep` checkpoints; 0 is taken as 1.
  CheckpointDirectory(std::string dir, uint32_t keep);

  const std::string& dir() const { return dir_; }
  uint32_t keep() const { return keep_; }

  // "ckpt-00000000000000000042.gtc" for version 42.
  static std::string FileName(uint64_t version);
  // True (and *version set) for a name FileName() could have produced.
  static bool ParseFileName(const std::string& name, uint64_t* version);

  // Writes the store as <dir>/FileName(store.version()), replacing a file of
  // the same version, creating `dir` if missing. Then removes the oldest
  // checkpoints (lowest versions, never the one just written) until `keep`
  // remain. `written_path` (optional) is set once the new file is in place,
  // even if removing an old one then fails (that error is returned).
  Status Save(const ParameterStore& store, const CheckpointMeta& meta, std::string* written_path);

  // Loads the newest valid checkpoint, trying files by descending version.
  // A file that fails verification (DATA_LOSS; also a file whose header
  // version differs from its name) or vanished is skipped and recorded as
  // "<path>: <reason>" in *skipped (optional). Returns NOT_FOUND when the
  // directory holds no checkpoint (or does not exist), DATA_LOSS when none
  // is valid, and any other error (e.g. an unreadable file) as it comes,
  // without trying older files: an older checkpoint would silently lose
  // progress. On success sets *store, *meta (optional) and *restored_path
  // (optional).
  Status RestoreNewest(std::unique_ptr<ParameterStore>* store, CheckpointMeta* meta,
                       std::string* restored_path, std::vector<std::string>* skipped);

  // Paths of the checkpoint files, oldest (lowest version) first; empty
  // when the directory is missing or unreadable.
  std::vector<std::string> List() const;

 private:
  // Versions of the checkpoint files, ascending; NOT_FOUND if no directory.
  Status ListVersions(std::vector<uint64_t>* versions) const;
  std::string PathOf(uint64_t version) const;

  std::string dir_;
  uint32_t keep_;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_MASTER_CHECKPOINT_H_
