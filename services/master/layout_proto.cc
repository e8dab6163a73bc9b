#include "services/master/layout_proto.h"

#include <string>
#include <utility>
#include <vector>

namespace gaptrain {

void LayoutToProto(const ParameterLayout& layout, proto::ModelLayout* out) {
  out->Clear();
  for (const TensorSpec& t : layout.tensors()) {
    proto::TensorSpec* spec = out->add_tensors();
    spec->set_name(t.name);
    for (int64_t d : t.shape) spec->add_shape(d);
  }
}

Status LayoutFromProto(const proto::ModelLayout& in, ParameterLayout* out) {
  // Cap the model so a malicious layout cannot make the master allocate
  // unbounded memory: 2^34 floats is 64 GiB.
  constexpr uint64_t kMaxParameters = uint64_t{1} << 34;
  ParameterLayout layout;
  uint64_t total = 0;
  for (int i = 0; i < in.tensors_size(); ++i) {
    const proto::TensorSpec& spec = in.tensors(i);
    if (spec.dtype() != proto::TENSOR_DTYPE_FLOAT32) {
      return Status::InvalidArgument("layout.tensors[" + std::to_string(i) + "] ('" +
                                     spec.name() + "'): parameters must be float32");
    }
    std::vector<int64_t> shape(spec.shape().begin(), spec.shape().end());
    uint64_t size = 1;
    for (int64_t d : shape) {
      if (d < 0 || (d > 0 && size > kMaxParameters / static_cast<uint64_t>(d))) {
        return Status::InvalidArgument("layout.tensors[" + std::to_string(i) + "] ('" +
                                       spec.name() + "'): shape out of range");
      }
      size *= static_cast<uint64_t>(d);
    }
    total += size;
    if (total > kMaxParameters) {
      return Status::InvalidArgument("layout: more than 2^34 parameters");
    }
    Status s = layout.Add(spec.name(), shape);
    if (!s.ok()) {
      return Status::InvalidArgument("layout.tensors[" + std::to_string(i) + "]: " +
                                     s.message());
    }
  }
  *out = std::move(layout);
  return Status::OK();
}

namespace {

constexpr std::pair<BufferDType, proto::TensorDType> kDTypes[] = {
    {BufferDType::kFloat32, proto::TENSOR_DTYPE_FLOAT32},
    {BufferDType::kFloat64, proto::TENSOR_DTYPE_FLOAT64},
    {BufferDType::kInt64, proto::TENSOR_DTYPE_INT64},
    {BufferDType::kInt32, proto::TENSOR_DTYPE_INT32},
    {BufferDType::kUint8, proto::TENSOR_DTYPE_UINT8},
    {BufferDType::kBool, proto::TENSOR_DTYPE_BOOL},
};

}  // namespace

void BufferLayoutToProto(const BufferLayout& layout, proto::ModelLayout* out) {
  out->clear_buffers();
  for (const BufferSpec& b : layout.buffers()) {
    proto::TensorSpec* spec = out->add_buffers();
    spec->set_name(b.name);
    for (int64_t d : b.shape) spec->add_shape(d);
    for (const auto& [ours, theirs] : kDTypes) {
      if (ours == b.dtype) spec->set_dtype(theirs);
    }
  }
}

Status BufferLayoutFromProto(const proto::ModelLayout& in, BufferLayout* out) {
  BufferLayout layout;
  for (int i = 0; i < in.buffers_size(); ++i) {
    const proto::TensorSpec& spec = in.buffers(i);
    const std::string where =
        "layout.buffers[" + std::to_string(i) + "] ('" + spec.name() + "')";
    bool known = false;
    BufferDType dtype = BufferDType::kFloat32;
    for (const auto& [ours, theirs] : kDTypes) {
      if (theirs == spec.dtype()) {
        dtype = ours;
        known = true;
      }
    }
    if (!known) {
      return Status::InvalidArgument(where + ": unknown dtype " + std::to_string(spec.dtype()));
    }
    Status s = layout.Add(spec.name(), std::vector<int64_t>(spec.shape().begin(), spec.shape().end()),
                          dtype);
    if (!s.ok()) return Status::InvalidArgument(where + ": " + s.message());
  }
  *out = std::move(layout);
  return Status::OK();
}

}  // namespace gaptrain
