// A checkpoint's parameters θ and the module's buffers (BatchNorm's
// running statistics, as the master keeps them) in LibTorch, so a user can
// take the trained model away: as named tensors in C++, or as a file
// Python's torch.load() reads as a state_dict (a dict of name -> tensor:
// the parameters in layout order, then the buffers) that a module with the
// same names accepts in load_state_dict(strict=True). The rule's state
// (momenta, snapshots) is not exported.
//
// Builds only with //third_party:torch; the master itself does not link
// LibTorch for checkpoints.

#ifndef GAPTRAIN_SERVICES_MASTER_CHECKPOINT_TORCH_H_
#define GAPTRAIN_SERVICES_MASTER_CHECKPOINT_TORCH_H_

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

#include "services/base/status.h"
#include "services/engine/parameter_store.h"
#include "services/master/checkpoint.h"

namespace gaptrain {

// The store's parameters as contiguous float32 CPU tensors with the
// layout's names and shapes, in layout order. Each tensor owns its memory
// (no views into one flat buffer), so the store may go away.
Status StoreTensors(const ParameterStore& store,
                    std::vector<std::pair<std::string, at::Tensor>>* tensors);

// The module's buffers a checkpoint holds (CheckpointMeta::buffer_values),
// as contiguous CPU tensors of their own dtypes, appended to *tensors;
// none when it holds no values (a model without buffers, or a file from
// before they were kept).
Status BufferTensors(const CheckpointMeta& meta,
                     std::vector<std::pair<std::string, at::Tensor>>* tensors);

// Reads and verifies the checkpoint at `path` (ReadCheckpoint's errors:
// DATA_LOSS for a torn or corrupt file) and returns its parameters as
// StoreTensors does, then its buffers as BufferTensors does. On error
// *tensors is unchanged.
Status LoadCheckpointTensors(const std::string& path,
                             std::vector<std::pair<std::string, at::Tensor>>* tensors);

// Writes the checkpoint's parameters to `out_path` in torch.save's zip
// format (torch::pickle_save of a Dict[str, Tensor]), atomically like
// WriteCheckpoint. In Python: sd = torch.load(out_path);
// model.load_state_dict(sd).
Status ExportCheckpointForTorch(const std::string& checkpoint_path, const std::string& out_path);

// The same for a store already read (a sharded job's, joined by
// shard_checkpoints.h) and its meta's buffers.
Status ExportStoreForTorch(const ParameterStore& store, const CheckpointMeta& meta,
                           const std::string& out_path);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_MASTER_CHECKPOINT_TORCH_H_
