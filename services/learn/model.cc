// Model: the built-in networks, TorchScript loading, and the flat buffers
// that the module's parameters and gradients alias.
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
//
// Only narrow LibTorch headers are included: <torch/torch.h> costs about
// 30 s per translation unit.

#include "services/learn/model.h"

#include <sys/stat.h>

#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/functional/pooling.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <ATen/Context.h>
#include <torch/cuda.h>
#include <torch/script.h>
#include <torch/utils.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <unordered_set>
#include <utility>
#include <vector>

namespace gaptrain {

namespace internal {

// Times a parameter's .grad() was found detached from the flat gradient
// buffer after backward and had to be copied back (process-wide). Not part
// of model.h: tests declare it themselves to assert that it stays 0.
std::atomic<int64_t> grad_fallback_copies{0};
int64_t GradFallbackCopies() { return grad_fallback_copies.load(); }

}  // namespace internal

namespace {

namespace F = torch::nn::functional;

// ---------------------------------------------------------------------------
// Built-in networks.

class Net : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(torch::Tensor x) = 0;
};

// flatten, Linear(C*H*W, 256), ReLU, Linear(256, 128), ReLU, Linear(128, K).
class Mlp : public Net {
 public:
  explicit Mlp(const ModelInput& in)
      : fc1_(register_module("fc1",
                             torch::nn::Linear(in.channels * in.height * in.width, 256))),
        fc2_(register_module("fc2", torch::nn::Linear(256, 128))),
        fc3_(register_module("fc3", torch::nn::Linear(128, in.num_classes))) {}

  torch::Tensor forward(torch::Tensor x) override {
    x = x.flatten(1);
    x = torch::relu(fc1_->forward(x));
    x = torch::relu(fc2_->forward(x));
    return fc3_->forward(x);
  }

 private:
  torch::nn::Linear fc1_, fc2_, fc3_;
};

// LeCun et al. 1998 with ReLU and max pooling. conv1 pads a 28-pixel side
// by 2, so MNIST sees the paper's 32x32 geometry: both 28x28 and 32x32
// reach fc1 with 16x5x5 features. Other sides (at least 16) are not padded
// and size fc1 from their own feature map.
class LeNet5 : public Net {
 public:
  static int64_t Pad(int64_t size) { return size == 28 ? 2 : 0; }
  // The side of conv2's pooled map for an input side `size`.
  static int64_t FeatureSide(int64_t size) {
    const int64_t c1 = size + 2 * Pad(size) - 4;
    const int64_t c2 = c1 / 2 - 4;
    return c2 / 2;
  }

  explicit LeNet5(const ModelInput& in)
      : conv1_(register_module(
            "conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(in.channels, 6, 5).padding(
                         torch::ExpandingArray<2>({Pad(in.height), Pad(in.width)}))))),
        conv2_(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(6, 16, 5)))),
        fc1_(register_module("fc1", torch::nn::Linear(16 * FeatureSide(in.height) *
                                                          FeatureSide(in.width),
                                                      120))),
        fc2_(register_module("fc2", torch::nn::Linear(120, 84))),
        fc3_(register_module("fc3", torch::nn::Linear(84, in.num_classes))) {}

  torch::Tensor forward(torch::Tensor x) override {
    x = torch::max_pool2d(torch::relu(conv1_->forward(x)), 2);
    x = torch::max_pool2d(torch::relu(conv2_->forward(x)), 2);
    x = x.flatten(1);
    x = torch::relu(fc1_->forward(x));
    x = torch::relu(fc2_->forward(x));
    return fc3_->forward(x);
  }

 private:
  torch::nn::Conv2d conv1_, conv2_;
  torch::nn::Linear fc1_, fc2_, fc3_;
};

torch::nn::Conv2d Conv3x3(int64_t in, int64_t out, int64_t stride) {
  return torch::nn::Conv2d(
      torch::nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false));
}

// He et al. 2016's basic block with the option A shortcut: identity, or,
// when the block changes shape, subsampling by `stride` and zero channels
// padded on both sides (no parameters).
class BasicBlock : public torch::nn::Module {
 public:
  BasicBlock(int64_t in, int64_t out, int64_t stride)
      : conv1_(register_module("conv1", Conv3x3(in, out, stride))),
        bn1_(register_module("bn1", torch::nn::BatchNorm2d(out))),
        conv2_(register_module("conv2", Conv3x3(out, out, 1))),
        bn2_(register_module("bn2", torch::nn::BatchNorm2d(out))),
        stride_(stride),
        pad_before_((out - in) / 2),
        pad_after_(out - in - (out - in) / 2) {}

  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor y = torch::relu(bn1_->forward(conv1_->forward(x)));
    y = bn2_->forward(conv2_->forward(y));
    torch::Tensor shortcut = x;
    if (stride_ != 1) {
      shortcut = shortcut.slice(2, 0, c10::nullopt, stride_).slice(3, 0, c10::nullopt, stride_);
    }
    if (pad_before_ != 0 || pad_after_ != 0) {
      shortcut = at::constant_pad_nd(shortcut, {0, 0, 0, 0, pad_before_, pad_after_}, 0.0);
    }
    return torch::relu(y + shortcut);
  }

 private:
  torch::nn::Conv2d conv1_;
  torch::nn::BatchNorm2d bn1_;
  torch::nn::Conv2d conv2_;
  torch::nn::BatchNorm2d bn2_;
  int64_t stride_;
  int64_t pad_before_, pad_after_;
};

// Blocks registered as "0", "1", ... so names read "layer2.0.conv1.weight".
class Stage : public torch::nn::Module {
 public:
  Stage(int64_t in, int64_t out, int64_t stride, int blocks) {
    for (int i = 0; i < blocks; ++i) {
      blocks_.push_back(register_module(
          std::to_string(i), std::make_shared<BasicBlock>(i == 0 ? in : out, out,
                                                          i == 0 ? stride : 1)));
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    for (auto& b : blocks_) x = b->forward(x);
    return x;
  }

 private:
  std::vector<std::shared_ptr<BasicBlock>> blocks_;
};

// ResNet-20 for CIFAR (He et al. 2016, section 4.2): 3x3 conv to 16
// channels, three stages of 3 basic blocks (16, 32, 64 channels; the last
// two stages start with stride 2), global average pooling, fc.
class ResNet20 : public Net {
 public:
  explicit ResNet20(const ModelInput& in)
      : conv1_(register_module("conv1", Conv3x3(in.channels, 16, 1))),
        bn1_(register_module("bn1", torch::nn::BatchNorm2d(16))),
        layer1_(register_module("layer1", std::make_shared<Stage>(16, 16, 1, 3))),
        layer2_(register_module("layer2", std::make_shared<Stage>(16, 32, 2, 3))),
        layer3_(register_module("layer3", std::make_shared<Stage>(32, 64, 2, 3))),
        fc_(register_module("fc", torch::nn::Linear(64, in.num_classes))) {}

  torch::Tensor forward(torch::Tensor x) override {
    x = torch::relu(bn1_->forward(conv1_->forward(x)));
    x = layer1_->forward(x);
    x = layer2_->forward(x);
    x = layer3_->forward(x);
    x = x.mean({2, 3});
    return fc_->forward(x);
  }

 private:
  torch::nn::Conv2d conv1_;
  torch::nn::BatchNorm2d bn1_;
  std::shared_ptr<Stage> layer1_, layer2_, layer3_;
  torch::nn::Linear fc_;
};

std::string ShapeString(c10::IntArrayRef sizes) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < sizes.size(); ++i) out << (i ? ", " : "") << sizes[i];
  out << "]";
  return out.str();
}

std::string InputString(const ModelInput& in) {
  return "[" + std::to_string(in.channels) + ", " + std::to_string(in.height) + ", " +
         std::to_string(in.width) + "]";
}

// The message of a LibTorch exception without its C++ backtrace, on one
// line. A TorchScript interpreter error is a traceback through the
// module's code followed by the cause; only the cause is kept.
std::string ErrorText(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  std::string text = c10_error != nullptr ? c10_error->what_without_backtrace() : e.what();
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    if (!line.empty()) lines.push_back(line);
  }
  if (lines.size() > 1 && text.find("Traceback of TorchScript") != std::string::npos) {
    text = lines.back();
  } else {
    text.clear();
    for (const std::string& line : lines) text += (text.empty() ? "" : " ") + line;
  }
  const size_t kMax = 600;
  if (text.size() > kMax) text = text.substr(0, kMax) + "...";
  return text;
}

Status CheckInput(const ModelInput& in) {
  if (in.channels < 1 || in.height < 1 || in.width < 1) {
    return Status::InvalidArgument("model input shape " + InputString(in) +
                                   " must be positive");
  }
  if (in.num_classes < 2) {
    return Status::InvalidArgument("model num_classes " + std::to_string(in.num_classes) +
                                   " must be at least 2");
  }
  return Status::OK();
}

// GPUs this LibTorch can use; 0 without CUDA.
int64_t CudaDevices() {
  try {
    return torch::cuda::is_available() ? static_cast<int64_t>(torch::cuda::device_count()) : 0;
  } catch (const std::exception&) {
    return 0;
  }
}

// Creating a built-in seeds LibTorch's process-wide generator and draws the
// initial weights from it; the lock keeps two threads' draws apart.
std::mutex& InitMutex() {
  static std::mutex mu;
  return mu;
}

}  // namespace

// ---------------------------------------------------------------------------

struct Model::Impl {
  ModelInput input;
  std::string what;  // "model mlp" or "TorchScript model <path>", for messages

  std::shared_ptr<Net> net;          // a built-in, or
  torch::jit::script::Module script;  // a TorchScript module when !net
  bool training = true;

  ParameterLayout layout;
  std::vector<torch::Tensor> params;  // layout order
  std::vector<torch::Tensor> buffers;
  size_t num_buffer_values = 0;
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
              const std::vector<torch::Tensor>& named_buffers);

  // After backward: every .grad() must still be its slice of ModuleGrads().
  void ReclaimGrads();

  // Rebinds parameters, gradients and buffers onto `target`, mirrored or
  // not (only the CPU can be unmirrored). Either all of it moves or, on an
  // exception, nothing did.
  void Place(const c10::Device& target, bool mirror);
  // Place, then a forward on a zero batch; on failure back to the CPU.
  Status PlaceAndProbe(const c10::Device& target, bool mirror);
};

Status Model::Impl::Bind(
    const std::vector<std::pair<std::string, torch::Tensor>>& named_params,
    const std::vector<torch::Tensor>& module_buffers) {
  std::unordered_set<const void*> seen;
  for (const auto& [name, p] : named_params) {
    if (p.scalar_type() != torch::kFloat || !p.device().is_cpu() || p.is_sparse()) {
      return Status::InvalidArgument(what + ": parameter " + name + " is " +
                                     std::string(c10::toString(p.scalar_type())) + " on " +
                                     p.device().str() + "; only dense float32 on CPU is supported");
    }
    if (!seen.insert(p.unsafeGetTensorImpl()).second) {
      return Status::InvalidArgument(what + ": parameter " + name +
                                     " is shared with another name (tied weights are not "
                                     "supported)");
    }
    GAPTRAIN_RETURN_IF_ERROR(layout.Add(name, p.sizes().vec()));
  }
  const int64_t total = static_cast<int64_t>(layout.size());
  flat_params = torch::empty({total}, torch::kFloat);
  flat_grads = torch::zeros({total}, torch::kFloat);
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < named_params.size(); ++i) {
    const TensorSpec& spec = layout.tensors()[i];
    torch::Tensor p = named_params[i].second;
    const auto offset = static_cast<int64_t>(spec.offset);
    const auto size = static_cast<int64_t>(spec.size);
    torch::Tensor slice = flat_params.narrow(0, offset, size).view(spec.shape);
    slice.copy_(p.detach());
    p.set_data(slice);
    p.mutable_grad() = flat_grads.narrow(0, offset, size).view(spec.shape);
    params.push_back(p);
  }
  for (const torch::Tensor& b : module_buffers) {
    if (!b.defined()) continue;
    buffers.push_back(b);
    num_buffer_values += static_cast<size_t>(b.numel());
  }
  return Status::OK();
}

void Model::Impl::ReclaimGrads() {
  const torch::Tensor& grads = ModuleGrads();
  float* base = grads.data_ptr<float>();
  for (size_t i = 0; i < params.size(); ++i) {
    const TensorSpec& spec = layout.tensors()[i];
    torch::Tensor& grad = params[i].mutable_grad();
    if (grad.defined() && grad.data_ptr() == static_cast<void*>(base + spec.offset) &&
        grad.is_contiguous() && grad.numel() == static_cast<int64_t>(spec.size)) {
      continue;
    }
    torch::NoGradGuard no_grad;
    torch::Tensor slice =
        grads.narrow(0, static_cast<int64_t>(spec.offset), static_cast<int64_t>(spec.size))
            .view(spec.shape);
    if (grad.defined()) slice.copy_(grad);  // else it stays 0
    grad = slice;
    internal::grad_fallback_copies.fetch_add(1);
  }
}

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

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;

Status Model::CreateBuiltin(const std::string& name, const ModelInput& input, uint64_t seed,
                            std::unique_ptr<Model>* model) {
  model->reset();
  GAPTRAIN_RETURN_IF_ERROR(CheckInput(input));
  if (name == "lenet5" &&
      (LeNet5::FeatureSide(input.height) < 1 || LeNet5::FeatureSide(input.width) < 1)) {
    return Status::InvalidArgument("model lenet5 needs an input of at least 16x16, got " +
                                   InputString(input));
  }
  if (name == "resnet20" && (input.height < 4 || input.width < 4)) {
    return Status::InvalidArgument("model resnet20 needs an input of at least 4x4, got " +
                                   InputString(input));
  }
  auto impl = std::make_unique<Impl>();
  impl->input = input;
  impl->what = "model " + name;
  try {
    std::lock_guard<std::mutex> lock(InitMutex());
    torch::manual_seed(seed);
    if (name == "mlp") {
      impl->net = std::make_shared<Mlp>(input);
    } else if (name == "lenet5") {
      impl->net = std::make_shared<LeNet5>(input);
    } else if (name == "resnet20") {
      impl->net = std::make_shared<ResNet20>(input);
    } else {
      return Status::InvalidArgument("unknown built-in model \"" + name +
                                     "\" (choose mlp, lenet5 or resnet20)");
    }
    impl->net->train(true);
    std::vector<std::pair<std::string, torch::Tensor>> named;
    for (const auto& item : impl->net->named_parameters(/*recurse=*/true)) {
      named.emplace_back(item.key(), item.value());
    }
    std::vector<torch::Tensor> buffers;
    for (const auto& item : impl->net->named_buffers(/*recurse=*/true)) {
      buffers.push_back(item.value());
    }
    GAPTRAIN_RETURN_IF_ERROR(impl->Bind(named, buffers));
  } catch (const std::exception& e) {
    return Status::Internal("model " + name + " on input " + InputString(input) + ": " +
                            ErrorText(e));
  }
  model->reset(new Model(std::move(impl)));
  return Status::OK();
}

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
    std::vector<torch::Tensor> buffers;
    for (const auto& item : m.named_buffers(/*recurse=*/true)) buffers.push_back(item.value);
    GAPTRAIN_RETURN_IF_ERROR(impl->Bind(named, buffers));
  } catch (const std::exception& e) {
    return Status::InvalidArgument("TorchScript model " + path + ": " + ErrorText(e));
  }
  model->reset(new Model(std::move(impl)));
  return Status::OK();
}

const ParameterLayout& Model::layout() const { return impl_->layout; }
const ModelInput& Model::input() const { return impl_->input; }

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

float* Model::parameters() {
  impl_->params_dirty = true;
  return impl_->flat_params.data_ptr<float>();
}
const float* Model::parameters() const { return impl_->flat_params.data_ptr<float>(); }
void Model::ParametersChanged() { impl_->params_dirty = true; }
const float* Model::gradients() const { return impl_->flat_grads.data_ptr<float>(); }

float Model::ComputeGradient(const float* images, const int64_t* labels, int64_t batch) {
  Impl& m = *impl_;
  const ModelInput& in = m.input;
  m.ZeroGrads();
  try {
    m.SyncParameters();
    torch::Tensor x = m.ToDevice(torch::from_blob(
        const_cast<float*>(images), {batch, in.channels, in.height, in.width}, torch::kFloat));
    torch::Tensor y =
        m.ToDevice(torch::from_blob(const_cast<int64_t*>(labels), {batch}, torch::kLong));
    m.SetTraining(true);
    torch::Tensor loss = F::cross_entropy(m.Forward(x), y);
    loss.backward();
    m.ReclaimGrads();
    if (m.mirrored) {
      torch::NoGradGuard no_grad;
      m.flat_grads.copy_(m.dev_grads);  // one copy; synchronous
    }
    return loss.item<float>();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gaptrain: %s: ComputeGradient failed: %s\n", m.what.c_str(),
                 ErrorText(e).c_str());
    try {
      m.ZeroGrads();
      m.ReclaimGrads();
    } catch (const std::exception& again) {
      // A device in a bad state: the host gradients are what callers read.
      m.flat_grads.zero_();
      std::fprintf(stderr, "gaptrain: %s: resetting the gradients failed: %s\n",
                   m.what.c_str(), ErrorText(again).c_str());
    }
    return std::numeric_limits<float>::quiet_NaN();
  }
}

void Model::Evaluate(const float* images, const int64_t* labels, int64_t batch,
                     double* loss_sum, int64_t* correct) {
  Impl& m = *impl_;
  const ModelInput& in = m.input;
  try {
    torch::NoGradGuard no_grad;
    m.SyncParameters();
    torch::Tensor x = m.ToDevice(torch::from_blob(
        const_cast<float*>(images), {batch, in.channels, in.height, in.width}, torch::kFloat));
    torch::Tensor y =
        m.ToDevice(torch::from_blob(const_cast<int64_t*>(labels), {batch}, torch::kLong));
    m.SetTraining(false);
    torch::Tensor logits = m.Forward(x);
    const double loss =
        F::cross_entropy(logits, y, F::CrossEntropyFuncOptions().reduction(torch::kSum))
            .item<double>();
    const int64_t hits = logits.argmax(1).eq(y).sum().item<int64_t>();
    *loss_sum += loss;
    *correct += hits;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gaptrain: %s: Evaluate failed: %s\n", m.what.c_str(),
                 ErrorText(e).c_str());
    *loss_sum += std::numeric_limits<double>::quiet_NaN();
  }
}

size_t Model::num_buffer_values() const { return impl_->num_buffer_values; }

// Buffer by buffer: copy_ converts type and device at once. ResNet-20 has
// 57 small buffers; they travel rarely (not on every step), so one copy
// each is fine.
void Model::CopyBuffersTo(float* out) const {
  torch::NoGradGuard no_grad;
  for (const torch::Tensor& b : impl_->buffers) {
    const int64_t n = b.numel();
    torch::from_blob(out, {n}, torch::kFloat).copy_(b.reshape({n}));
    out += n;
  }
}

void Model::CopyBuffersFrom(const float* in) {
  torch::NoGradGuard no_grad;
  for (torch::Tensor& b : impl_->buffers) {
    const int64_t n = b.numel();
    // copy_ converts: num_batches_tracked (int64) round-trips exactly below 2^24.
    b.copy_(torch::from_blob(const_cast<float*>(in), b.sizes(), torch::kFloat));
    in += n;
  }
}

}  // namespace gaptrain
