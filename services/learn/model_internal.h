// Model's insides (model.h), shared by the files that implement it and
// included by nothing else:
//   model.cc             the flat buffers that the module's parameters and
//                        gradients alias; a training step, an evaluation,
//                        module buffers in and out
//   model_zoo.cc         the built-in networks (mlp, lenet5, resnet20)
//   torchscript_model.cc a user's TorchScript module, checked as it loads
//   model_device.cc      computing on a device, the host buffers mirroring it
//
// How the aliasing works (LibTorch 1.13):
//  - Each parameter is rebound with set_data() to a view (narrow + view) of
//    one flat float tensor, so module code and parameters() share memory.
//  - Each parameter's .grad() is set to a view of a second flat tensor
//    before the first backward and stays defined. AccumulateGrad then takes
//    its in-place branch (`variable_grad += new_grad`, taken whenever the
//    existing grad is defined and backward runs without create_graph), so
//    the gradient lands in the flat buffer. Had the grad been undefined,
//    AccumulateGrad would "steal" the freshly computed gradient tensor (or
//    clone it) and the flat buffer would never see it.
//  - ComputeGradient zeroes the flat gradient buffer instead of zero_grad()
//    (zero_grad in 1.13 may reset grads to undefined). After backward it
//    checks that every .grad() still points at its slice; a grad that was
//    replaced anyway (a hook, a user TorchScript module doing odd things) is
//    copied into the slice and the view reinstalled, and counted in
//    internal::GradFallbackCopies() so tests can assert it never happens.
//
// Devices (MoveTo): on a device other than the CPU the same rebinding is
// done onto two flat DEVICE tensors (dev_params, dev_grads), and the host
// buffers become their mirrors: SyncParameters() copies flat_params to
// dev_params in one copy when params_dirty (set by the non-const
// parameters() and ParametersChanged()), and ComputeGradient copies
// dev_grads to flat_grads in one copy after backward. The host copy of the
// parameters is the authoritative one (nothing writes the device copy but
// SyncParameters), so moving back to the CPU only rebinds. Module buffers
// (BatchNorm statistics) are moved with set_data, so the module's own
// handles follow. MirrorOnCpuForTesting() runs the mirrored mode with CPU
// "device" tensors: the same copies and bookkeeping, testable without a GPU.

#ifndef GAPTRAIN_SERVICES_LEARN_MODEL_INTERNAL_H_
#define GAPTRAIN_SERVICES_LEARN_MODEL_INTERNAL_H_

#include <torch/csrc/jit/api/module.h>
#include <torch/nn/module.h>
#include <torch/utils.h>

#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "services/base/status.h"
#include "services/engine/buffer_layout.h"
#include "services/engine/parameter_layout.h"
#include "services/learn/model.h"

namespace gaptrain {

namespace model_internal {

// A built-in network (model_zoo.cc).
class Net : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(torch::Tensor x) = 0;
};

// "[2, 1, 28, 28]".
std::string ShapeString(c10::IntArrayRef sizes);
// "[1, 28, 28]": the input's channels, height and width.
std::string InputString(const ModelInput& in);
// The message of a LibTorch exception without its C++ backtrace, on one
// line. A TorchScript interpreter error is a traceback through the
// module's code followed by the cause; only the cause is kept.
std::string ErrorText(const std::exception& e);
// INVALID_ARGUMENT unless the shape is positive and there are >= 2 classes.
Status CheckInput(const ModelInput& in);

}  // namespace model_internal

struct Model::Impl {
  ModelInput input;
  std::string what;  // "model mlp" or "TorchScript model <path>", for messages

  std::shared_ptr<model_internal::Net> net;  // a built-in, or
  torch::jit::script::Module script;        // a TorchScript module when !net
  bool training = true;

  ParameterLayout layout;
  std::vector<torch::Tensor> params;  // layout order
  BufferLayout buffer_layout;
  std::vector<torch::Tensor> buffers;  // buffer_layout order
  torch::Tensor flat_params;  // host: what parameters() returns
  torch::Tensor flat_grads;   // host: what gradients() returns

  // Where forward and backward run. When `mirrored`, the module's
  // parameters and gradients are views into dev_params and dev_grads on
  // `device`; otherwise into flat_params and flat_grads (and both dev_*
  // are undefined).
  c10::Device device{c10::kCPU};
  bool mirrored = false;
  torch::Tensor dev_params;
  torch::Tensor dev_grads;
  // flat_params changed since it was last copied to dev_params.
  bool params_dirty = false;

  // The tensor the module's gradients alias.
  const torch::Tensor& ModuleGrads() const { return mirrored ? dev_grads : flat_grads; }

  // Mirrored: the host parameters to the device, in one copy, if they changed.
  void SyncParameters() {
    if (!mirrored || !params_dirty) return;
    torch::NoGradGuard no_grad;
    dev_params.copy_(flat_params);
    params_dirty = false;
  }

  // A caller's batch, on the compute device. Mirrored, always a copy (also
  // on the CPU, so the tests take the same path as a GPU).
  torch::Tensor ToDevice(const torch::Tensor& host) const {
    if (!mirrored) return host;
    return host.to(device, host.scalar_type(), /*non_blocking=*/false, /*copy=*/true);
  }

  void ZeroGrads() {
    flat_grads.zero_();
    if (mirrored) dev_grads.zero_();
  }

  torch::Tensor Forward(const torch::Tensor& x) {
    if (net) return net->forward(x);
    return script.forward({x}).toTensor();
  }

  void SetTraining(bool on) {
    if (training == on) return;
    if (net) {
      net->train(on);
    } else {
      script.train(on);
    }
    training = on;
  }

  // Builds the layout and the flat buffers, and rebinds every parameter and
  // its gradient to views of them.
  Status Bind(const std::vector<std::pair<std::string, torch::Tensor>>& named_params,
              const std::vector<std::pair<std::string, torch::Tensor>>& named_buffers);

  // After backward: every .grad() must still be its slice of ModuleGrads().
  void ReclaimGrads();

  // Rebinds parameters, gradients and buffers onto `target`, mirrored or
  // not (only the CPU can be unmirrored). Either all of it moves or, on an
  // exception, nothing did.
  void Place(const c10::Device& target, bool mirror);
  // Place, then a forward on a zero batch; on failure back to the CPU.
  Status PlaceAndProbe(const c10::Device& target, bool mirror);
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_LEARN_MODEL_INTERNAL_H_
