#include "services/learn/device.h"

#include <torch/cuda.h>

namespace gaptrain {

bool CudaAvailable() {
  try {
    return torch::cuda::is_available();
  } catch (...) {
    return false;
  }
}

DeviceChoice ChooseDevice(const std::string& requested) {
  DeviceChoice choice{"cpu", ""};
  if (requested != "cuda") return choice;
  if (!CudaAvailable()) {
    choice.note = "--device cuda: this LibTorch has no CUDA or sees no GPU; computing on the CPU";
    return choice;
  }
  choice.device = "cuda";
  return choice;
}

}  // namespace gaptrain
