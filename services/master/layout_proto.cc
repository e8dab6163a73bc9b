#include "services/master/layout_proto.h"

#include <string>

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

}  // namespace gaptrain
