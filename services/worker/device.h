// ChooseDevice: where a worker computes. "cuda" is honoured only when the
// LibTorch in use was built with CUDA, sees a GPU, and the model can run
// there; otherwise the worker computes on the CPU and the note says why.
// Today model.h keeps parameters and gradients in host memory (the flat
// buffers the master's pulls and pushes use in place), so every model runs
// on the CPU and "cuda" always falls back, with a note.

#ifndef GAPTRAIN_SERVICES_WORKER_DEVICE_H_
#define GAPTRAIN_SERVICES_WORKER_DEVICE_H_

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

#endif  // GAPTRAIN_SERVICES_WORKER_DEVICE_H_
