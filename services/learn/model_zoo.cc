// The built-in networks of Model::CreateBuiltin (model.h): an mlp, LeNet-5
// and ResNet-20, as LibTorch modules whose parameters model.cc then binds
// to the flat buffers.
//
// Only narrow LibTorch headers are included: <torch/torch.h> costs about
// 30 s per translation unit.

#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/pooling.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "services/learn/model.h"
#include "services/learn/model_internal.h"

namespace gaptrain {

namespace {

using model_internal::CheckInput;
using model_internal::ErrorText;
using model_internal::InputString;
using model_internal::Net;

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

// Creating a built-in seeds LibTorch's process-wide generator and draws the
// initial weights from it; the lock keeps two threads' draws apart.
std::mutex& InitMutex() {
  static std::mutex mu;
  return mu;
}

}  // namespace

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
    std::vector<std::pair<std::string, torch::Tensor>> buffers;
    for (const auto& item : impl->net->named_buffers(/*recurse=*/true)) {
      buffers.emplace_back(item.key(), item.value());
    }
    GAPTRAIN_RETURN_IF_ERROR(impl->Bind(named, buffers));
  } catch (const std::exception& e) {
    return Status::Internal("model " + name + " on input " + InputString(input) + ": " +
                            ErrorText(e));
  }
  model->reset(new Model(std::move(impl)));
  return Status::OK();
}

}  // namespace gaptrain
