// ModelDeclaration: a trainer's model as it declares it to the master
// (spec.model.fromTrainer; proto ModelDeclaration): the parameters' layout
// and initial values, the buffers' layout and values. The master adopts
// the first one it receives as the job's model, and checks every later
// one against it. With spec.master.shards each master holds one range of
// θ (shard_plan.h): a trainer declares the whole model's layout to every
// shard, each shard's own initial values, and the buffers' values to
// shard 0 only, where the module's buffers live.

#ifndef GAPTRAIN_SERVICES_MASTER_MODEL_DECLARATION_H_
#define GAPTRAIN_SERVICES_MASTER_MODEL_DECLARATION_H_

#include <string>
#include <vector>

#include "proto/gaptrain.pb.h"
#include "services/base/status.h"
#include "services/engine/buffer_layout.h"
#include "services/engine/parameter_layout.h"
#include "services/engine/shard_plan.h"

namespace gaptrain {

struct DeclaredModel {
  ParameterLayout layout;       // the whole model's
  ParameterShard shard;             // the part of θ `values` holds
  std::vector<float> values;    // shard.size() initial parameters
  BufferLayout buffer_layout;   // the whole model's
  std::string buffer_values;    // buffer_layout.bytes() on shard 0; else empty

  // The model's layout of the shard's part (ShardLayout).
  ParameterLayout ShardParameters() const { return ShardLayout(layout, shard); }
};

// A whole model (shard 0 of 1) cut down to shard `index` of `count`: the
// range's values, and the buffers' values on shard 0 only. INVALID_ARGUMENT
// when the model has fewer parameters than shards.
Status KeepShard(uint32_t index, uint32_t count, DeclaredModel* model);

// Builds a DeclaredModel from a declaration's messages, as they arrive.
// Every message is validated against what came before (untrusted input):
// the layout must rebuild (layout_proto.h's limits) and come first only;
// the slices must follow each other from offset 0 with whole float32
// values, finite ones; the buffers' values must fit their layout. Errors
// are INVALID_ARGUMENT naming the field. A shard's assembler wants that
// shard's values (shard_plan.h cuts the declared layout) and buffers'
// values on shard 0 only.
class DeclarationAssembler {
 public:
  explicit DeclarationAssembler(uint32_t shard_index = 0, uint32_t shard_count = 1)
      : shard_index_(shard_index), shard_count_(shard_count) {}

  Status Add(const proto::ModelDeclaration& message);
  // Once the stream ended: the model, when every value arrived.
  Status Finish(DeclaredModel* out);

 private:
  const uint32_t shard_index_, shard_count_;
  bool started_ = false;
  uint64_t total_ = 0;
  DeclaredModel model_;
};

// "" when `declared` is `held`'s model, else its first difference ("tensor
// 3 is ... in the declaration, ... on the master").
std::string DeclarationDifference(const DeclaredModel& declared, const ParameterLayout& held,
                                  const BufferLayout& held_buffers);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_MASTER_MODEL_DECLARATION_H_
