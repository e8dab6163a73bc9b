#include "services/master/model_declaration.h"

#include <cmath>
#include <cstring>

#include "services/master/layout_proto.h"

namespace gaptrain {

Status DeclarationAssembler::Add(const proto::ModelDeclaration& message) {
  if (!started_) {
    if (!message.has_layout()) {
      return Status::InvalidArgument("declaration: the first message carries no layout");
    }
    GAPTRAIN_RETURN_IF_ERROR(LayoutFromProto(message.layout(), &model_.layout));
    GAPTRAIN_RETURN_IF_ERROR(BufferLayoutFromProto(message.layout(), &model_.buffer_layout));
    if (model_.layout.size() == 0) {
      return Status::InvalidArgument("declaration: layout: the model has no parameters");
    }
    std::vector<ParameterShard> plan;
    GAPTRAIN_RETURN_IF_ERROR(PlanShards(model_.layout, shard_count_, &plan));
    model_.shard = plan[shard_index_];
    if (message.total_values() != model_.shard.size()) {
      const std::string whose =
          shard_count_ == 1 ? std::string("the layout has ")
                            : "shard " + std::to_string(shard_index_) + " of " +
                                  std::to_string(shard_count_) + " holds ";
      return Status::InvalidArgument("declaration: total_values " +
                                     std::to_string(message.total_values()) + ", " + whose +
                                     std::to_string(model_.shard.size()) + " parameters");
    }
    const size_t buffer_bytes = shard_index_ == 0 ? model_.buffer_layout.bytes() : 0;
    if (message.buffer_values().size() != buffer_bytes) {
      return Status::InvalidArgument(
          "declaration: buffer_values: " + std::to_string(message.buffer_values().size()) +
          " bytes, the buffers hold " + std::to_string(buffer_bytes) +
          (shard_index_ == 0 ? "" : " on a shard other than 0"));
    }
    model_.buffer_values = message.buffer_values();
    total_ = message.total_values();
    model_.values.reserve(total_);
    started_ = true;
  } else if (message.has_layout() || !message.buffer_values().empty()) {
    return Status::InvalidArgument("declaration: only the first message carries the layout");
  }
  if (message.total_values() != total_) {
    return Status::InvalidArgument("declaration: total_values changed from " +
                                   std::to_string(total_) + " to " +
                                   std::to_string(message.total_values()));
  }
  if (message.offset() != model_.values.size()) {
    return Status::InvalidArgument("declaration: offset " + std::to_string(message.offset()) +
                                   ", expected " + std::to_string(model_.values.size()));
  }
  const std::string& bytes = message.values();
  if (bytes.size() % sizeof(float) != 0) {
    return Status::InvalidArgument("declaration: values: " + std::to_string(bytes.size()) +
                                   " bytes, not whole float32 values");
  }
  const size_t n = bytes.size() / sizeof(float);
  if (n > total_ - model_.values.size()) {
    return Status::InvalidArgument("declaration: values beyond the layout's " +
                                   std::to_string(total_) + " parameters");
  }
  const size_t at = model_.values.size();
  model_.values.resize(at + n);
  std::memcpy(model_.values.data() + at, bytes.data(), bytes.size());
  for (size_t i = at; i < at + n; ++i) {
    if (!std::isfinite(model_.values[i])) {
      const size_t element = model_.shard.begin + i;
      const TensorSpec& t = model_.layout.tensors()[model_.layout.TensorIndexOf(element)];
      return Status::InvalidArgument("declaration: " + t.name + "[" +
                                     std::to_string(element - t.offset) + "] is not finite");
    }
  }
  return Status::OK();
}

Status DeclarationAssembler::Finish(DeclaredModel* out) {
  if (!started_) return Status::InvalidArgument("declaration: no message");
  if (model_.values.size() != total_) {
    return Status::InvalidArgument("declaration: " + std::to_string(model_.values.size()) +
                                   " of " + std::to_string(total_) + " values arrived");
  }
  *out = std::move(model_);
  model_ = DeclaredModel();
  started_ = false;
  return Status::OK();
}

Status KeepShard(uint32_t index, uint32_t count, DeclaredModel* model) {
  std::vector<ParameterShard> plan;
  GAPTRAIN_RETURN_IF_ERROR(PlanShards(model->layout, count, &plan));
  const ParameterShard range = plan[index];
  if (range.begin > 0 || range.end < model->values.size()) {
    model->values = std::vector<float>(model->values.begin() + range.begin,
                                       model->values.begin() + range.end);
  }
  if (index != 0) model->buffer_values.clear();
  model->shard = range;
  return Status::OK();
}

std::string DeclarationDifference(const DeclaredModel& declared, const ParameterLayout& held,
                                  const BufferLayout& held_buffers) {
  std::string difference = declared.layout.DifferenceFrom(held, "in the declaration",
                                                          "on the master");
  if (difference.empty()) {
    difference = declared.buffer_layout.DifferenceFrom(held_buffers, "in the declaration",
                                                       "on the master");
  }
  return difference;
}

}  // namespace gaptrain
