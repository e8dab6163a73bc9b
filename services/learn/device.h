// ChooseDevice: where a worker computes. "cuda" is honoured when the
// LibTorch in use was built with CUDA and sees a GPU (CudaAvailable());
// the Model then computes on the GPU with device copies of its flat
// parameter and gradient buffers (model.h, "Devices"). Otherwise the worker
// computes on the CPU and the note says why. One more fallback comes later,
// when the model is placed (PlaceJobModel, job_model.h): a model that does
// not run on the GPU (a TorchScript module that is not device-agnostic, out
// of GPU memory) stays on the CPU with a warning.

#ifndef GAPTRAIN_SERVICES_LEARN_DEVICE_H_
#define GAPTRAIN_SERVICES_LEARN_DEVICE_H_

#include <string>

namespace gaptrain {

struct DeviceChoice {
  std::string device;  // "cpu" or "cuda"
  std::string note;    // why the request was not met; "" when it was
};

// `requested`: "cpu" or "cuda" (WorkerOptions checked it).
DeviceChoice ChooseDevice(const std::string& requested);

// Whether this LibTorch sees a usable GPU.
bool CudaAvailable();

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_LEARN_DEVICE_H_
