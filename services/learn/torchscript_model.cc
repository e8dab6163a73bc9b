// Model::LoadTorchScript (model.h): a user's module saved with
// torch.jit.save, checked as it loads (a forward method, logits of the
// right shape, trainable float parameters) so that the error says what
// does not fit; model.cc then binds its parameters to the flat buffers.
//
// Only narrow LibTorch headers are included: <torch/torch.h> costs about
// 30 s per translation unit.

#include <sys/stat.h>

#include <torch/csrc/jit/serialization/import.h>
#include <torch/utils.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "services/learn/model.h"
#include "services/learn/model_internal.h"

namespace gaptrain {

using model_internal::CheckInput;
using model_internal::ErrorText;
using model_internal::ShapeString;

Status Model::LoadTorchScript(const std::string& path, const ModelInput& input,
                              std::unique_ptr<Model>* model) {
  model->reset();
  GAPTRAIN_RETURN_IF_ERROR(CheckInput(input));
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return Status::NotFound("TorchScript model " + path + ": " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    return Status::InvalidArgument("TorchScript model " + path + ": not a regular file");
  }
  auto impl = std::make_unique<Impl>();
  impl->input = input;
  impl->what = "TorchScript model " + path;
  try {
    impl->script = torch::jit::load(path, c10::Device(c10::kCPU));
  } catch (const std::exception& e) {
    return Status::InvalidArgument("TorchScript model " + path +
                                   ": not a TorchScript archive (torch.jit.save): " +
                                   ErrorText(e));
  }
  try {
    torch::jit::script::Module& m = impl->script;
    if (!m.find_method("forward")) {
      return Status::InvalidArgument("TorchScript model " + path + ": has no forward method");
    }
    const std::vector<int64_t> probe_shape = {2, input.channels, input.height, input.width};
    c10::IValue out;
    try {
      torch::NoGradGuard no_grad;
      m.eval();
      out = m.forward({torch::zeros(probe_shape)});
    } catch (const std::exception& e) {
      return Status::InvalidArgument("TorchScript model " + path + ": forward(x) with x of shape " +
                                     ShapeString(probe_shape) + " failed: " + ErrorText(e));
    }
    if (!out.isTensor()) {
      return Status::InvalidArgument("TorchScript model " + path + ": forward(x) with x of shape " +
                                     ShapeString(probe_shape) + " returned a " +
                                     out.tagKind() + ", expected a [2, " +
                                     std::to_string(input.num_classes) + "] tensor of logits");
    }
    const torch::Tensor logits = out.toTensor();
    if (logits.dim() != 2 || logits.size(0) != 2 || logits.size(1) != input.num_classes ||
        logits.scalar_type() != torch::kFloat) {
      return Status::InvalidArgument(
          "TorchScript model " + path + ": forward(x) with x of shape " +
          ShapeString(probe_shape) + " returned a " +
          std::string(c10::toString(logits.scalar_type())) + " tensor of shape " +
          ShapeString(logits.sizes()) + "; expected Float logits of shape [2, " +
          std::to_string(input.num_classes) + "]");
    }
    m.train(true);
    impl->training = true;
    std::vector<std::pair<std::string, torch::Tensor>> named;
    for (const auto& item : m.named_parameters(/*recurse=*/true)) {
      named.emplace_back(item.name, item.value);
    }
    if (named.empty()) {
      return Status::InvalidArgument("TorchScript model " + path + ": has no parameters");
    }
    bool any_trainable = false;
    for (const auto& item : named) any_trainable = any_trainable || item.second.requires_grad();
    if (!any_trainable) {
      return Status::InvalidArgument("TorchScript model " + path +
                                     ": no parameter requires grad (all frozen)");
    }
    std::vector<std::pair<std::string, torch::Tensor>> buffers;
    for (const auto& item : m.named_buffers(/*recurse=*/true)) {
      buffers.emplace_back(item.name, item.value);
    }
    GAPTRAIN_RETURN_IF_ERROR(impl->Bind(named, buffers));
  } catch (const std::exception& e) {
    return Status::InvalidArgument("TorchScript model " + path + ": " + ErrorText(e));
  }
  model->reset(new Model(std::move(impl)));
  return Status::OK();
}

}  // namespace gaptrain
