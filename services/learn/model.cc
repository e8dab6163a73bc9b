// Model (model.h): the flat buffers that the module's parameters and
// gradients alias (model_internal.h says how), a training step, an
// evaluation, and the module's buffers in and out. The built-in networks
// are in model_zoo.cc, TorchScript loading in torchscript_model.cc, devices
// in model_device.cc.
//
// Only narrow LibTorch headers are included: <torch/torch.h> costs about
// 30 s per translation unit.

#include "services/learn/model.h"

#include <torch/nn/functional/loss.h>
#include <torch/utils.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "services/learn/model_internal.h"

namespace gaptrain {

namespace internal {

// Times a parameter's .grad() was found detached from the flat gradient
// buffer after backward and had to be copied back (process-wide). Not part
// of model.h: tests declare it themselves to assert that it stays 0.
std::atomic<int64_t> grad_fallback_copies{0};
int64_t GradFallbackCopies() { return grad_fallback_copies.load(); }

}  // namespace internal

namespace F = torch::nn::functional;

namespace model_internal {

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

}  // namespace model_internal

using model_internal::ErrorText;

Status Model::Impl::Bind(
    const std::vector<std::pair<std::string, torch::Tensor>>& named_params,
    const std::vector<std::pair<std::string, torch::Tensor>>& named_buffers) {
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
  for (const auto& [name, b] : named_buffers) {
    if (!b.defined()) continue;
    BufferDType dtype;
    switch (b.scalar_type()) {
      case torch::kFloat: dtype = BufferDType::kFloat32; break;
      case torch::kDouble: dtype = BufferDType::kFloat64; break;
      case torch::kLong: dtype = BufferDType::kInt64; break;
      case torch::kInt: dtype = BufferDType::kInt32; break;
      case torch::kByte: dtype = BufferDType::kUint8; break;
      case torch::kBool: dtype = BufferDType::kBool; break;
      default:
        return Status::InvalidArgument(what + ": buffer " + name + " is " +
                                       std::string(c10::toString(b.scalar_type())) +
                                       "; buffers may be float32, float64, int64, int32, uint8 "
                                       "or bool");
    }
    Status added = buffer_layout.Add(name, b.sizes().vec(), dtype);
    if (!added.ok()) return Status::InvalidArgument(what + ": " + added.message());
    buffers.push_back(b);
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

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;

const ParameterLayout& Model::layout() const { return impl_->layout; }
const ModelInput& Model::input() const { return impl_->input; }

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

const BufferLayout& Model::buffer_layout() const { return impl_->buffer_layout; }

// Buffer by buffer, through a contiguous host tensor (the packed bytes are
// not aligned for their dtypes). ResNet-20 has 57 small buffers; they
// travel rarely (not on every step), so one copy each is fine.
void Model::CopyBuffersTo(uint8_t* out) const {
  torch::NoGradGuard no_grad;
  const std::vector<BufferSpec>& specs = impl_->buffer_layout.buffers();
  for (size_t i = 0; i < specs.size(); ++i) {
    const torch::Tensor host = impl_->buffers[i].detach().to(torch::kCPU).contiguous();
    std::memcpy(out + specs[i].offset, host.data_ptr(), specs[i].bytes);
  }
}

void Model::CopyBuffersFrom(const uint8_t* in) {
  torch::NoGradGuard no_grad;
  const std::vector<BufferSpec>& specs = impl_->buffer_layout.buffers();
  for (size_t i = 0; i < specs.size(); ++i) {
    torch::Tensor& b = impl_->buffers[i];
    torch::Tensor host = torch::empty(b.sizes(), b.options().device(torch::kCPU));
    std::memcpy(host.data_ptr(), in + specs[i].offset, specs[i].bytes);
    b.copy_(host);
  }
}

}  // namespace gaptrain
