// Model: an image classifier (a built-in mlp, lenet5 or resnet20, or a
// user's TorchScript module) whose parameters and gradients are two flat
// float buffers in host memory laid out as the master's ParameterLayout. A
// pull writes straight into parameters(); a gradient leaves from
// gradients() without a gather copy.
//
// Devices. On the CPU (the default) the module's parameters and gradients
// are views into those two host buffers themselves. After MoveTo("cuda")
// they are views into ONE contiguous device tensor each, mirrored by the
// host buffers: before a forward the host parameters are copied to the
// device in one copy if they changed since the last copy, and after
// backward the device gradients are copied to the host buffer in one copy,
// so parameters() and gradients() keep their meaning for callers. Batches
// go to the device with each call; BatchNorm buffers live there too.
//
// LibTorch stays behind this header (pimpl), so including it is cheap.
// Not thread-safe; one Model per thread. Thread counts of the math
// libraries are process-wide: see compute_threads.h.

#ifndef GAPTRAIN_SERVICES_LEARN_MODEL_H_
#define GAPTRAIN_SERVICES_LEARN_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>

#include "services/base/status.h"
#include "services/engine/buffer_layout.h"
#include "services/engine/parameter_layout.h"

namespace gaptrain {

// The shape of one input image and the number of classes.
struct ModelInput {
  int64_t channels = 1;
  int64_t height = 28;
  int64_t width = 28;
  int64_t num_classes = 10;
};

class Model {
 public:
  // "mlp" (784-256-128-10 style, sized from the input), "lenet5" (LeCun's
  // 5-layer CNN; padding makes it work on 28x28 and 32x32) or "resnet20"
  // (He et al.'s CIFAR ResNet, 3x3 stages of 16/32/64, BatchNorm).
  // Parameters are initialised with LibTorch's defaults from `seed`.
  static Status CreateBuiltin(const std::string& name, const ModelInput& input,
                              uint64_t seed, std::unique_ptr<Model>* model);

  // A scripted module saved with torch.jit.save; forward(x) must map a
  // [B, C, H, W] float batch to [B, num_classes] logits. The error says
  // what does not fit (file, forward signature, output shape).
  static Status LoadTorchScript(const std::string& path, const ModelInput& input,
                                std::unique_ptr<Model>* model);

  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ParameterLayout& layout() const;
  const ModelInput& input() const;

  // Where the module computes: "cpu" (the default) or a LibTorch device
  // such as "cuda" or "cuda:1". On a device other than the CPU the host
  // buffers are mirrored (see above); MoveTo("cpu") goes back to computing
  // on the host buffers themselves. The parameters() and buffer values
  // are kept. A forward on a small zero batch checks that the model runs
  // there; on any error (no such device, a LibTorch without CUDA, out of
  // memory, a TorchScript module that is not device-agnostic) the model
  // is left on the CPU, working, and the error says why. Moving to a GPU
  // turns TF32 off for cuDNN convolutions, process-wide, so gradients agree
  // with the CPU's (LibTorch's default lets convolutions round inputs to
  // 10-bit mantissas). May reallocate
  // the host buffers (page-locked on a GPU, for faster copies): pointers
  // taken from parameters() and gradients() before are invalid after.
  Status MoveTo(const std::string& device);
  // Tests: the mirrored mode on the CPU (separate "device" tensors and the
  // same copies as on a GPU), to check the mirror without a GPU.
  Status MirrorOnCpuForTesting();
  // "cpu", "cuda:0", ...: where forward and backward run.
  std::string device() const;
  // Whether parameters() and gradients() are host copies of device tensors.
  bool mirrored() const;

  // The P parameters; writing here changes the module's weights. The
  // non-const accessor marks them changed (a caller that may write gets
  // them copied to the device before the next ComputeGradient or
  // Evaluate); read through a const Model to avoid that copy. A caller
  // that keeps the pointer and writes through it after a ComputeGradient
  // or Evaluate must call ParametersChanged().
  float* parameters();
  const float* parameters() const;
  void ParametersChanged();
  // The P gradients of the last ComputeGradient (in host memory).
  const float* gradients() const;

  // Training step on one batch ([batch, C, H, W] normalised images, labels
  // in [0, num_classes)): forward in training mode (BatchNorm updates its
  // running statistics), cross-entropy, backward. Returns the mean loss;
  // gradients() then holds its gradient (without weight decay). No
  // exception escapes: a LibTorch error (e.g. a label out of range) is
  // printed to stderr and returns NaN with all gradients 0.
  float ComputeGradient(const float* images, const int64_t* labels, int64_t batch);

  // Forward in evaluation mode (BatchNorm uses running statistics): adds
  // the batch's summed cross-entropy to *loss_sum and its correct
  // predictions to *correct. On a LibTorch error, adds NaN to *loss_sum.
  void Evaluate(const float* images, const int64_t* labels, int64_t batch, double* loss_sum,
                int64_t* correct);

  // The module's buffers (BatchNorm's running statistics and any other,
  // named_buffers() in order) with their dtypes; empty for a model without
  // any. A trainer sends their values to the master so the evaluator and
  // the export get the trained statistics.
  const BufferLayout& buffer_layout() const;
  // Their values packed as buffer_layout() says (buffer_layout().bytes()).
  void CopyBuffersTo(uint8_t* out) const;
  void CopyBuffersFrom(const uint8_t* in);

 private:
  struct Impl;
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_LEARN_MODEL_H_
