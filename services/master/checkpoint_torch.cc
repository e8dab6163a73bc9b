#include "services/master/checkpoint_torch.h"

// Narrow LibTorch headers only: <torch/torch.h> costs about 30 s per
// translation unit.
#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>
#include <ATen/ops/empty.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <cstring>
#include <exception>
#include <memory>

#include "services/base/atomic_file.h"
#include "services/master/checkpoint.h"

namespace gaptrain {

Status StoreTensors(const ParameterStore& store,
                    std::vector<std::pair<std::string, at::Tensor>>* tensors) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  try {
    out.reserve(store.layout().num_tensors());
    for (const TensorSpec& spec : store.layout().tensors()) {
      at::Tensor t = at::empty(spec.shape, at::TensorOptions().dtype(at::kFloat));
      std::memcpy(t.data_ptr<float>(), store.params() + spec.offset, spec.size * sizeof(float));
      out.emplace_back(spec.name, std::move(t));
    }
  } catch (const std::exception& e) {
    return Status::Internal(std::string("creating tensors: ") + e.what());
  }
  *tensors = std::move(out);
  return Status::OK();
}

Status BufferTensors(const CheckpointMeta& meta,
                     std::vector<std::pair<std::string, at::Tensor>>* tensors) {
  if (meta.buffer_values.empty()) return Status::OK();
  if (meta.buffer_values.size() != meta.buffer_layout.bytes()) {
    return Status::InvalidArgument("the buffers' values are " +
                                   std::to_string(meta.buffer_values.size()) +
                                   " bytes, their layout says " +
                                   std::to_string(meta.buffer_layout.bytes()));
  }
  try {
    for (const BufferSpec& b : meta.buffer_layout.buffers()) {
      at::ScalarType type = at::kFloat;
      switch (b.dtype) {
        case BufferDType::kFloat32: type = at::kFloat; break;
        case BufferDType::kFloat64: type = at::kDouble; break;
        case BufferDType::kInt64: type = at::kLong; break;
        case BufferDType::kInt32: type = at::kInt; break;
        case BufferDType::kUint8: type = at::kByte; break;
        case BufferDType::kBool: type = at::kBool; break;
      }
      at::Tensor t = at::empty(b.shape, at::TensorOptions().dtype(type));
      std::memcpy(t.data_ptr(), meta.buffer_values.data() + b.offset, b.bytes);
      tensors->emplace_back(b.name, std::move(t));
    }
  } catch (const std::exception& e) {
    return Status::Internal(std::string("creating buffer tensors: ") + e.what());
  }
  return Status::OK();
}

Status LoadCheckpointTensors(const std::string& path,
                             std::vector<std::pair<std::string, at::Tensor>>* tensors) {
  std::unique_ptr<ParameterStore> store;
  CheckpointMeta meta;
  GAPTRAIN_RETURN_IF_ERROR(ReadCheckpoint(path, &store, &meta));
  std::vector<std::pair<std::string, at::Tensor>> out;
  Status s = StoreTensors(*store, &out);
  if (s.ok()) s = BufferTensors(meta, &out);
  if (!s.ok()) return Status(s.code(), path + ": " + s.message());
  *tensors = std::move(out);
  return Status::OK();
}

namespace {

// `tensors` (consumed) as a state_dict file at `out_path`.
Status WriteStateDict(std::vector<std::pair<std::string, at::Tensor>> tensors,
                      const std::string& out_path) {
  std::vector<char> bytes;
  try {
    c10::Dict<std::string, at::Tensor> dict;  // keeps insertion (layout) order
    dict.reserve(tensors.size());
    for (auto& [name, tensor] : tensors) dict.insert(name, std::move(tensor));
    tensors.clear();
    bytes = torch::jit::pickle_save(c10::IValue(std::move(dict)));
  } catch (const std::exception& e) {
    return Status::Internal(out_path + ": serialising the tensors: " + e.what());
  }
  return WriteFileAtomically(out_path, bytes.data(), bytes.size());
}

}  // namespace

Status ExportCheckpointForTorch(const std::string& checkpoint_path, const std::string& out_path) {
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  GAPTRAIN_RETURN_IF_ERROR(LoadCheckpointTensors(checkpoint_path, &tensors));
  return WriteStateDict(std::move(tensors), out_path);
}

Status ExportStoreForTorch(const ParameterStore& store, const CheckpointMeta& meta,
                           const std::string& out_path) {
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  Status s = StoreTensors(store, &tensors);
  if (s.ok()) s = BufferTensors(meta, &tensors);
  if (!s.ok()) return s;
  return WriteStateDict(std::move(tensors), out_path);
}

}  // namespace gaptrain
