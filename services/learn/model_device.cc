// Where a Model computes (model.h, MoveTo): on the CPU the module's
// parameters and gradients alias the host buffers themselves; on another
// device they alias two flat device tensors that the host buffers mirror
// (model_internal.h says how), with a forward on a zero batch to check the
// model runs there and a way back to the CPU when it does not.
//
// Only narrow LibTorch headers are included: <torch/torch.h> costs about
// 30 s per translation unit.

#include <ATen/Context.h>
#include <torch/cuda.h>
#include <torch/utils.h>

#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "services/learn/model.h"
#include "services/learn/model_internal.h"

namespace gaptrain {

using model_internal::ErrorText;

namespace {

// GPUs this LibTorch can use; 0 without CUDA.
int64_t CudaDevices() {
  try {
    return torch::cuda::is_available() ? static_cast<int64_t>(torch::cuda::device_count()) : 0;
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace

void Model::Impl::Place(const c10::Device& target, bool mirror) {
  torch::NoGradGuard no_grad;
  const int64_t total = static_cast<int64_t>(layout.size());
  // Everything that can fail (allocation on the device, copies) first.
  torch::Tensor host_params = flat_params, host_grads = flat_grads;
  torch::Tensor new_params, new_grads;
  if (mirror) {
    const auto options = torch::TensorOptions().dtype(torch::kFloat).device(target);
    new_params = torch::empty({total}, options);
    new_params.copy_(flat_params);
    new_grads = torch::zeros({total}, options);
    if (target.is_cuda() && !flat_params.is_pinned()) {
      // Page-locked host buffers: the per-step copies run at full DMA speed.
      try {
        const auto pinned = torch::TensorOptions().dtype(torch::kFloat).pinned_memory(true);
        torch::Tensor p = torch::empty({total}, pinned);
        torch::Tensor g = torch::empty({total}, pinned);
        p.copy_(flat_params);
        g.copy_(flat_grads);
        host_params = p;
        host_grads = g;
      } catch (const std::exception&) {
        // Pageable memory works too, only slower.
      }
    }
  } else {
    new_params = host_params;
    new_grads = host_grads;
  }
  std::vector<torch::Tensor> new_buffers;
  for (const torch::Tensor& b : buffers) new_buffers.push_back(b.to(target));

  // Then the rebinding, which does not allocate.
  for (size_t i = 0; i < params.size(); ++i) {
    const TensorSpec& spec = layout.tensors()[i];
    const auto offset = static_cast<int64_t>(spec.offset);
    const auto size = static_cast<int64_t>(spec.size);
    params[i].set_data(new_params.narrow(0, offset, size).view(spec.shape));
    params[i].mutable_grad() = new_grads.narrow(0, offset, size).view(spec.shape);
  }
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (!new_buffers[i].is_same(buffers[i])) buffers[i].set_data(new_buffers[i]);
  }
  flat_params = host_params;
  flat_grads = host_grads;
  dev_params = mirror ? new_params : torch::Tensor();
  dev_grads = mirror ? new_grads : torch::Tensor();
  device = mirror ? new_params.device() : target;  // "cuda" -> "cuda:0"
  mirrored = mirror;
  params_dirty = false;  // new_params was copied from flat_params
}

Status Model::Impl::PlaceAndProbe(const c10::Device& target, bool mirror) {
  const std::string name = target.str() + (mirror && target.is_cpu() ? " (mirrored)" : "");
  try {
    Place(target, mirror);
  } catch (const std::exception& e) {
    // Place changed nothing.
    return Status::FailedPrecondition(what + ": cannot move to " + name + ": " + ErrorText(e));
  }
  if (!mirror) return Status::OK();
  try {
    torch::NoGradGuard no_grad;
    SetTraining(false);  // evaluation mode: BatchNorm statistics stay as they are
    torch::Tensor probe = Forward(torch::zeros({2, input.channels, input.height, input.width},
                                               torch::TensorOptions().device(device)));
    if (probe.device() != device) {
      throw std::runtime_error("forward returned its logits on " + probe.device().str());
    }
    return Status::OK();
  } catch (const std::exception& e) {
    const std::string why = ErrorText(e);
    try {
      Place(c10::Device(c10::kCPU), /*mirror=*/false);
    } catch (const std::exception& back) {
      return Status::Internal(what + ": does not run on " + name + " (" + why +
                              "), and moving back to the CPU failed: " + ErrorText(back));
    }
    return Status::FailedPrecondition(what + ": does not run on " + name + ": " + why);
  }
}

Status Model::MoveTo(const std::string& device) {
  c10::Device target(c10::kCPU);
  try {
    target = c10::Device(device);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(impl_->what + ": device \"" + device +
                                   "\" is not a LibTorch device (cpu, cuda, cuda:N): " +
                                   ErrorText(e));
  }
  if (target.is_cuda()) {
    const int64_t gpus = CudaDevices();
    if (gpus == 0) {
      return Status::FailedPrecondition(impl_->what + ": cannot move to " + device +
                                        ": this LibTorch has no CUDA or sees no GPU");
    }
    if (target.has_index() && target.index() >= gpus) {
      return Status::FailedPrecondition(impl_->what + ": cannot move to " + device + ": " +
                                        std::to_string(gpus) + " GPU(s) visible");
    }
    // LibTorch lets cuDNN convolutions round their inputs to TF32 (10-bit
    // mantissas) by default: resnet20's gradients then differed from the
    // CPU's by 1.2-4.3% of the largest on an H100, and 0.06-0.26% without
    // it, at no cost measured (docs/performance.md, "The model on a GPU").
    // A trainer on a GPU must push the gradient a CPU trainer would.
    at::globalContext().setAllowTF32CuDNN(false);
  }
  return impl_->PlaceAndProbe(target, /*mirror=*/!target.is_cpu());
}

Status Model::MirrorOnCpuForTesting() {
  return impl_->PlaceAndProbe(c10::Device(c10::kCPU), /*mirror=*/true);
}

std::string Model::device() const { return impl_->device.str(); }
bool Model::mirrored() const { return impl_->mirrored; }

}  // namespace gaptrain
