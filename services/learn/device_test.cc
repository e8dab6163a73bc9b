// ChooseDevice: "cpu" is always met; "cuda" is met exactly when this
// LibTorch sees a GPU, else the CPU with a note that says why (Debian's
// LibTorch has no CUDA, so here it is the fallback).

#include "services/learn/device.h"

#include <gtest/gtest.h>

namespace gaptrain {
namespace {

TEST(ChooseDeviceTest, CpuIsAlwaysMet) {
  const DeviceChoice c = ChooseDevice("cpu");
  EXPECT_EQ(c.device, "cpu");
  EXPECT_EQ(c.note, "");
}

TEST(ChooseDeviceTest, CudaWhenAvailableElseCpuWithANote) {
  const DeviceChoice c = ChooseDevice("cuda");
  if (CudaAvailable()) {
    EXPECT_EQ(c.device, "cuda");
    EXPECT_EQ(c.note, "");
  } else {
    EXPECT_EQ(c.device, "cpu");
    EXPECT_NE(c.note.find("--device cuda"), std::string::npos) << c.note;
    EXPECT_NE(c.note.find("no CUDA or sees no GPU"), std::string::npos) << c.note;
    EXPECT_NE(c.note.find("CPU"), std::string::npos) << c.note;
  }
}

}  // namespace
}  // namespace gaptrain
