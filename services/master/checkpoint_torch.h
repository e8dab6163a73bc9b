// A checkpoint's parameters θ in LibTorch, so a user can take the trained
// model away: as named tensors in C++, or as a file Python's torch.load()
// reads as a state_dict (a dict of name -> tensor in layout order) that a
// module with the same parameter names accepts in load_state_dict(). The
// rule's state (momenta, snapshots) is not exported.
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

namespace gaptrain {

// The store's parameters as contiguous float32 CPU tensors with the
// layout's names and shapes, in layout order. Each tensor owns its memory
// (no views into one flat buffer), so the store may go away.
Status StoreTensors(const ParameterStore& store,
                    std::vector<std::pair<std::string, at::Tensor>>* tensors);

// Reads and verifies the checkpoint at `path` (ReadCheckpoint's errors:
// DATA_LOSS for a torn or corrupt file) and returns its parameters as
// StoreTensors does. On error *tensors is unchanged.
Status LoadCheckpointTensors(const std::string& path,
                             std::vector<std::pair<std::string, at::Tensor>>* tensors);

// Writes the checkpoint's parameters to `out_path` in torch.save's zip
// format (torch::pickle_save of a Dict[str, Tensor]), atomically like
// WriteCheckpoint. In Python: sd = torch.load(out_path);
// model.load_state_dict(sd).
Status ExportCheckpointForTorch(const std::string& checkpoint_path, const std::string& out_path);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_MASTER_CHECKPOINT_TORCH_H_
