// θ after a fixed run of pushes has the same bits on every x86-64 node. The
// Gap and DC kernels are compiled as AVX-512, AVX2 and baseline clones
// (kernel_util.h) and the loader picks one per CPU; the expected
// fingerprints below were computed by each of the three (the clones forced
// one at a time) and agree, so whichever clone this machine runs must
// reproduce them. A change to a rule's arithmetic changes them on purpose:
// recompute them, on builds with each clone, and check they still agree.

#include <cstdint>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "services/engine/update_engine.h"

namespace gaptrain {
namespace {

// Values in [-1, 1) from a xorshift64 stream: the same on every platform.
class Values {
 public:
  float Next() {
    state_ ^= state_ << 13;
    state_ ^= state_ >> 7;
    state_ ^= state_ << 17;
    return static_cast<float>(state_ >> 40) / static_cast<float>(1 << 23) - 1.0f;
  }

 private:
  uint64_t state_ = 0x9E3779B97F4A7C15ull;
};

// FNV-1a over the bytes of θ.
uint64_t Fingerprint(const float* values, size_t n) {
  uint64_t h = 1469598103934665603ull;
  const auto* bytes = reinterpret_cast<const unsigned char*>(values);
  for (size_t i = 0; i < n * sizeof(float); ++i) {
    h ^= bytes[i];
    h *= 1099511628211ull;
  }
  return h;
}

// 48 pushes from 4 workers in turn (staleness 3 from the fourth push on),
// each worker pulling after its push; tensors of odd sizes, so every kernel
// runs its vector body and its remainder.
uint64_t ThetaAfterPushes(RuleConfig rule) {
  ParameterLayout layout;
  layout.Add("conv", {37, 5, 5});
  layout.Add("fc", {70001});
  layout.Add("bias", {3});
  UpdateEngine::Options options;
  options.rule = rule;
  options.rule.momentum = 0.9f;
  options.rule.weight_decay = 1e-4f;
  options.schedule.learning_rate = 0.05;
  std::unique_ptr<UpdateEngine> engine;
  EXPECT_TRUE(UpdateEngine::Create(layout, options, &engine).ok());
  if (engine == nullptr) return 0;
  const size_t p = layout.size();
  Values values;
  float* theta = engine->mutable_store()->params();
  for (size_t j = 0; j < p; ++j) theta[j] = 0.1f * values.Next();
  std::vector<float> pulled(p), gradient(p);
  std::vector<uint64_t> base(5);
  for (WorkerId w = 1; w <= 4; ++w) {
    EXPECT_TRUE(engine->Join(w).ok());
    EXPECT_TRUE(engine->Pull(w, pulled.data(), p, &base[w]).ok());
  }
  for (int push = 0; push < 48; ++push) {
    const WorkerId w = 1 + push % 4;
    for (float& g : gradient) g = values.Next();
    PushRequest request;
    request.worker = w;
    request.base_version = base[w];
    request.gradient = GradientView(gradient.data(), p);
    ApplyStats stats;
    EXPECT_TRUE(engine->Push(request, &stats).ok()) << "push " << push;
    EXPECT_TRUE(engine->Pull(w, pulled.data(), p, &base[w]).ok());
  }
  return Fingerprint(engine->store().params(), p);
}

RuleConfig Rule(RuleKind kind, GapPrecision precision, bool dc_adaptive = false) {
  RuleConfig rule;
  rule.kind = kind;
  rule.gap_precision = precision;
  rule.dc_adaptive = dc_adaptive;
  return rule;
}

TEST(SameBitsTest, GapAware) {
  EXPECT_EQ(ThetaAfterPushes(Rule(RuleKind::kGapAware, GapPrecision::kFloat32)),
            0xfb73a0072c232f1full);
  EXPECT_EQ(ThetaAfterPushes(Rule(RuleKind::kGapAware, GapPrecision::kBfloat16)),
            0x5222b9b6f85c20c9ull);
}

TEST(SameBitsTest, GapAwareDana) {
  EXPECT_EQ(ThetaAfterPushes(Rule(RuleKind::kGapAwareDana, GapPrecision::kFloat32)),
            0x75170942e5e95a0aull);
  EXPECT_EQ(ThetaAfterPushes(Rule(RuleKind::kGapAwareDana, GapPrecision::kBfloat16)),
            0x9b0bec32c29d9d10ull);
}

TEST(SameBitsTest, DcAsgd) {
  EXPECT_EQ(ThetaAfterPushes(Rule(RuleKind::kDcAsgd, GapPrecision::kFloat32)),
            0xc8fc34d43366df13ull);
  EXPECT_EQ(ThetaAfterPushes(Rule(RuleKind::kDcAsgd, GapPrecision::kFloat32, true)),
            0x9115724b3d584811ull);
  EXPECT_EQ(ThetaAfterPushes(Rule(RuleKind::kDcAsgd, GapPrecision::kBfloat16, true)),
            0xeb42925bc6b875f1ull);
}

}  // namespace
}  // namespace gaptrain
