// Compute per step of the learning library on the CPU and on a GPU, in the
// same run: ms per Model::ComputeGradient for the built-in models at a few
// batch sizes, with 1 compute thread (a worker's setting), with every CPU,
// and on CUDA, and the ratios. Each timed step marks the parameters changed
// first, as a worker's pull does, so on CUDA it includes the parameter copy
// to the device and the gradient copy back; a second CUDA column leaves the
// parameters alone (compute and the gradient copy only). Before timing, the
// first step's loss and gradients on CUDA are compared with the CPU's, the
// same check as model_test's CudaMatchesCpu, so the benchmark says whether
// the GPU computes the same thing even where GoogleTest is missing. LibTorch
// lets cuDNN use TF32 for convolutions by default (as PyTorch does);
// Model::MoveTo turns that off, and the TF32 settings are printed as the
// models ran, after the first model moved to CUDA.
//
// Built by bench/gpu/CMakeLists.txt (scripts/gpu-check.sh), not by Bazel:
// it exists for a machine with a CUDA LibTorch. Without CUDA it prints the
// CPU columns only.
//
//   compute_bench [--min_time=SECONDS] [--models=mlp,lenet5,resnet20]
//                 [--batches=32,128,512]
//
// Exits 1 if CUDA disagreed with the CPU.

#include <ATen/Context.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "services/base/available_cpus.h"
#include "services/learn/compute_threads.h"
#include "services/learn/device.h"
#include "services/learn/model.h"
#include "services/learn/synthetic_batch.h"

namespace gaptrain {
namespace {

using Batch = SyntheticBatch;

ModelInput InputFor(const std::string& model) {
  return model == "resnet20" ? ModelInput{3, 32, 32, 10} : ModelInput{1, 28, 28, 10};
}

std::unique_ptr<Model> Create(const std::string& name, const std::string& device) {
  std::unique_ptr<Model> m;
  Status s = Model::CreateBuiltin(name, InputFor(name), 1, &m);
  if (s.ok() && device != "cpu") s = m->MoveTo(device);
  if (!s.ok()) {
    std::fprintf(stderr, "%s on %s: %s\n", name.c_str(), device.c_str(), s.ToString().c_str());
    return nullptr;
  }
  return m;
}

// ms per step: two warm-up steps, then steps until min_time has passed
// (at least 3). ComputeGradient copies the gradients to the host before it
// returns, so a CUDA step has finished when the call does.
double MsPerStep(Model* m, const Batch& b, bool mark_changed, double min_time) {
  for (int i = 0; i < 2; ++i) {
    m->ParametersChanged();
    m->ComputeGradient(b.images.data(), b.labels.data(), b.size);
  }
  const auto start = std::chrono::steady_clock::now();
  int steps = 0;
  double elapsed = 0;
  while (steps < 3 || elapsed < min_time) {
    if (mark_changed) m->ParametersChanged();
    m->ComputeGradient(b.images.data(), b.labels.data(), b.size);
    ++steps;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return 1e3 * elapsed / steps;
}

// The first step on a fresh CPU model and a fresh CUDA model (same seed):
// loss within 1e-4 relative, gradients within 1e-3 of the largest one.
bool CudaAgrees(const std::string& name, const Batch& b) {
  auto cpu = Create(name, "cpu");
  auto gpu = Create(name, "cuda");
  if (!cpu || !gpu) return false;
  const float lc = cpu->ComputeGradient(b.images.data(), b.labels.data(), b.size);
  const float lg = gpu->ComputeGradient(b.images.data(), b.labels.data(), b.size);
  const size_t n = cpu->layout().size();
  double scale = 0, err = 0;
  for (size_t i = 0; i < n; ++i) {
    scale = std::max(scale, static_cast<double>(std::abs(cpu->gradients()[i])));
    err = std::max(err, static_cast<double>(std::abs(cpu->gradients()[i] - gpu->gradients()[i])));
  }
  const bool ok = std::isfinite(lc) && std::abs(lg - lc) <= 1e-4 * (1 + std::abs(lc)) &&
                  err < 1e-3 * scale + 1e-6;
  std::printf("check %-8s batch %4lld: loss cpu %.6f cuda %.6f, max |grad diff| %.3g of %.3g: %s\n",
              name.c_str(), static_cast<long long>(b.size), lc, lg, err, scale,
              ok ? "agree" : "DISAGREE");
  return ok;
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

int Main(int argc, char** argv) {
  double min_time = 0.5;
  std::vector<std::string> models = {"mlp", "lenet5", "resnet20"};
  std::vector<int64_t> batches = {32, 128, 512};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--min_time=", 0) == 0) {
      min_time = std::atof(arg.c_str() + 11);
    } else if (arg.rfind("--models=", 0) == 0) {
      models = Split(arg.substr(9));
    } else if (arg.rfind("--batches=", 0) == 0) {
      batches.clear();
      for (const std::string& b : Split(arg.substr(10))) batches.push_back(std::atoll(b.c_str()));
    } else {
      std::fprintf(stderr,
                   "usage: compute_bench [--min_time=S] [--models=a,b] [--batches=n,m]\n");
      return 2;
    }
  }

  const int cpus = AvailableCpus();
  const bool cuda = CudaAvailable();
  std::printf("LibTorch %s, %d CPUs available, CUDA %s (%d device(s))\n", TORCH_VERSION, cpus,
              cuda ? "available" : "NOT available",
              cuda ? static_cast<int>(torch::cuda::device_count()) : 0);
  std::printf("ms per ComputeGradient (parameters marked changed before each step, as a pull "
              "does); min %.2f s per cell\n\n",
              min_time);

  bool agree = true;
  if (cuda) {
    SetComputeThreads(cpus);
    for (const std::string& name : models) {
      const Batch b = RandomBatch(InputFor(name), 64, 3);
      if (!CudaAgrees(name, b)) agree = false;
    }
    // Read after a model moved to CUDA: MoveTo sets them for the process.
    std::printf("TF32 as the models ran: cuDNN convolutions %s, cuBLAS matmuls %s\n",
                at::globalContext().allowTF32CuDNN() ? "allowed" : "off",
                at::globalContext().allowTF32CuBLAS() ? "allowed" : "off");
    std::printf("\n");
  }

  std::printf("%-8s %5s | %9s %9s | %9s %9s | %10s %10s | %11s\n", "model", "batch", "cpu x1",
              "cpu xN", "cuda", "cuda-nopull", "cpu1/cuda", "cpuN/cuda",
              "cuda samp/s");
  std::printf("(cpu xN = %d threads)\n", cpus);
  for (const std::string& name : models) {
    for (int64_t batch : batches) {
      const Batch b = RandomBatch(InputFor(name), batch, 1);
      double ms_cpu1 = NAN, ms_cpun = NAN, ms_cuda = NAN, ms_cuda_nopull = NAN;
      {
        SetComputeThreads(1);
        auto m = Create(name, "cpu");
        if (m) ms_cpu1 = MsPerStep(m.get(), b, true, min_time);
      }
      {
        SetComputeThreads(cpus);
        auto m = Create(name, "cpu");
        if (m) ms_cpun = MsPerStep(m.get(), b, true, min_time);
      }
      if (cuda) {
        auto m = Create(name, "cuda");
        if (m) {
          ms_cuda = MsPerStep(m.get(), b, true, min_time);
          ms_cuda_nopull = MsPerStep(m.get(), b, false, min_time);
        }
      }
      std::printf("%-8s %5lld | %9.3f %9.3f | %9.3f %11.3f | %9.1fx %9.1fx | %11.0f\n",
                  name.c_str(), static_cast<long long>(batch), ms_cpu1, ms_cpun, ms_cuda,
                  ms_cuda_nopull, ms_cpu1 / ms_cuda, ms_cpun / ms_cuda, 1e3 * batch / ms_cuda);
      std::fflush(stdout);
    }
  }
  if (!agree) {
    std::printf("\nCUDA DISAGREED with the CPU (see the check lines above)\n");
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace gaptrain

int main(int argc, char** argv) { return gaptrain::Main(argc, argv); }
