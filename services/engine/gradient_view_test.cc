#include "services/engine/gradient_view.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "services/engine/update_engine.h"
#include "services/numeric/bfloat16.h"

namespace gaptrain {
namespace {

std::vector<float> RandomValues(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.01f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

// The wire bytes of `values` in `type`.
std::vector<uint8_t> WireBytes(const std::vector<float>& values, DType type) {
  std::vector<uint8_t> bytes(values.size() * DTypeSize(type));
  if (type == DType::kFloat32) {
    std::memcpy(bytes.data(), values.data(), bytes.size());
  } else {
    FloatsToBf16(values.data(), values.size(), reinterpret_cast<bf16_t*>(bytes.data()));
  }
  return bytes;
}

// What the rules should read from those bytes.
std::vector<float> Decoded(const std::vector<float>& values, DType type) {
  std::vector<float> out = values;
  if (type == DType::kBfloat16) {
    for (float& x : out) x = Bf16ToFloat(FloatToBf16(x));
  }
  return out;
}

// `bytes` in pieces of odd sizes, so values straddle pieces and start at
// every alignment, as they do in received gRPC slices.
SlicedBytes Pieces(const std::vector<uint8_t>& bytes) {
  static const size_t kSizes[] = {1, 3, 4094, 7, 16385, 2, 65537, 5, 12289};
  SlicedBytes out;
  size_t at = 0;
  for (size_t i = 0; at < bytes.size(); ++i) {
    const size_t n = std::min(kSizes[i % 9], bytes.size() - at);
    out.Append(bytes.data() + at, n);
    at += n;
  }
  return out;
}

class GradientViewTest : public ::testing::TestWithParam<DType> {};

TEST_P(GradientViewTest, ReadDecodesEveryBlockOfWireValues) {
  const DType type = GetParam();
  const std::vector<float> values = RandomValues(3 * GradientView::kBlock + 77, 1);
  const std::vector<uint8_t> bytes = WireBytes(values, type);
  const SlicedBytes pieces = Pieces(bytes);
  const GradientView view(&pieces, type, values.size());
  const std::vector<float> expected = Decoded(values, type);
  EXPECT_FALSE(view.contiguous());
  EXPECT_EQ(view.size(), values.size());
  auto scratch = std::make_unique<GradientView::Scratch>();
  // Blocks at odd starts too, as tensor pieces begin anywhere.
  for (size_t start : {size_t{0}, size_t{1}, size_t{4093}}) {
    for (size_t b0 = start; b0 < values.size(); b0 += GradientView::kBlock) {
      const size_t b1 = std::min(values.size(), b0 + GradientView::kBlock);
      const float* got = view.Read(b0, b1, scratch.get());
      ASSERT_EQ(std::memcmp(got, expected.data() + b0, (b1 - b0) * sizeof(float)), 0)
          << "block at " << b0;
    }
  }
  EXPECT_EQ(view.At(4096), expected[4096]);
  EXPECT_EQ(view.FindNonFinite(), values.size());
}

TEST_P(GradientViewTest, FindNonFiniteReportsTheFirstBadWireValue) {
  const DType type = GetParam();
  const size_t n = 2 * GradientView::kBlock + 10;
  for (size_t bad : {size_t{0}, size_t{1}, GradientView::kBlock - 1, GradientView::kBlock,
                     size_t{5000}, n - 1}) {
    for (float x : {std::nanf(""), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
      std::vector<float> values = RandomValues(n, 2);
      values[bad] = x;
      if (bad + 3 < n) values[bad + 3] = x;  // only the first is reported
      const std::vector<uint8_t> bytes = WireBytes(values, type);
      const SlicedBytes pieces = Pieces(bytes);
      EXPECT_EQ(GradientView(&pieces, type, n).FindNonFinite(), bad) << bad << " " << x;
      const std::vector<float> decoded = Decoded(values, type);
      EXPECT_EQ(GradientView(decoded.data(), n).FindNonFinite(), bad);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WireTypes, GradientViewTest,
                         ::testing::Values(DType::kFloat32, DType::kBfloat16),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

TEST(GradientViewTest, AFloatArrayIsReadInPlace) {
  const std::vector<float> values = RandomValues(10, 3);
  const GradientView view(values.data(), values.size());
  EXPECT_TRUE(view.contiguous());
  EXPECT_FALSE(view.empty());
  EXPECT_EQ(view.Read(4, 10, nullptr), values.data() + 4);
  EXPECT_EQ(view.At(7), values[7]);
  EXPECT_TRUE(GradientView().empty());
  EXPECT_EQ(GradientView().size(), 0u);
}

// Every rule applies a push read from wire pieces bit-identically to the
// same values in one array: θ, every state buffer and the Gap statistics,
// with one and with two update threads. Tensor sizes are not multiples of
// the block, so blocks end inside tensors and tensors end inside blocks.
struct RuleCase {
  RuleKind kind;
  int threads;
  DType wire;
};

class RuleOverWireTest : public ::testing::TestWithParam<RuleCase> {};

std::unique_ptr<UpdateEngine> MakeEngine(const RuleCase& rc) {
  ParameterLayout layout;
  layout.Add("a", {5000});
  layout.Add("b", {300, 1001});
  layout.Add("c", {4097});
  layout.Add("d", {300000});
  UpdateEngine::Options options;
  options.rule.kind = rc.kind;
  options.rule.momentum = rc.kind == RuleKind::kDanaSlim ? 0.0f : 0.9f;
  options.rule.weight_decay = 1e-4f;
  options.rule.num_threads = rc.threads;
  options.rule.dc_adaptive = true;
  options.schedule.learning_rate = 0.1;
  std::unique_ptr<UpdateEngine> engine;
  Status s = UpdateEngine::Create(layout, options, &engine);
  if (!s.ok()) ADD_FAILURE() << s.ToString();
  const std::vector<float> theta = RandomValues(engine->store().size(), 4);
  std::memcpy(engine->mutable_store()->params(), theta.data(), theta.size() * sizeof(float));
  for (WorkerId w : {1u, 2u}) engine->Join(w);
  return engine;
}

void ExpectSameStore(const ParameterStore& a, const ParameterStore& b) {
  ASSERT_EQ(std::memcmp(a.params(), b.params(), a.size() * sizeof(float)), 0) << "θ differs";
  ASSERT_EQ(a.buffers().size(), b.buffers().size());
  for (const auto& [name, buffer] : a.buffers()) {
    const FlatBuffer* other = b.buffer(name);
    ASSERT_NE(other, nullptr) << name;
    ASSERT_EQ(std::memcmp(buffer.data(), other->data(), buffer.bytes()), 0) << name << " differs";
  }
}

TEST_P(RuleOverWireTest, AppliesWirePiecesExactlyAsAnArray) {
  const RuleCase rc = GetParam();
  std::unique_ptr<UpdateEngine> array_engine = MakeEngine(rc);
  std::unique_ptr<UpdateEngine> wire_engine = MakeEngine(rc);
  const size_t p = array_engine->store().size();
  ASSERT_GT(p, 2 * (size_t{1} << 18)) << "too small for two update threads";
  std::vector<float> point(p);
  uint64_t version[3] = {};
  for (WorkerId w : {1u, 2u}) {
    ASSERT_TRUE(array_engine->Pull(w, point.data(), p, &version[w]).ok());
    ASSERT_TRUE(wire_engine->Pull(w, point.data(), p, &version[w]).ok());
  }
  // Worker 1, then worker 2 on its older copy (stale: a Gap above 1).
  for (WorkerId w : {1u, 2u}) {
    const std::vector<float> values = RandomValues(p, 10 + w);
    const std::vector<uint8_t> bytes = WireBytes(values, rc.wire);
    const SlicedBytes pieces = Pieces(bytes);
    const std::vector<float> decoded = Decoded(values, rc.wire);
    PushRequest request;
    request.worker = w;
    request.base_version = version[w];
    request.gradient = GradientView(decoded.data(), p);
    ApplyStats array_stats, wire_stats;
    ASSERT_TRUE(array_engine->Push(request, &array_stats).ok());
    request.gradient = GradientView(&pieces, rc.wire, p);
    ASSERT_TRUE(wire_engine->Push(request, &wire_stats).ok());
    ExpectSameStore(array_engine->store(), wire_engine->store());
    EXPECT_EQ(array_stats.outcome, wire_stats.outcome);
    EXPECT_EQ(array_stats.gap.gap_mean, wire_stats.gap.gap_mean);
    EXPECT_EQ(array_stats.gap.gap_max, wire_stats.gap.gap_max);
    EXPECT_EQ(array_stats.penalty_mean, wire_stats.penalty_mean);
    ASSERT_EQ(array_stats.per_tensor.size(), wire_stats.per_tensor.size());
    for (size_t t = 0; t < array_stats.per_tensor.size(); ++t) {
      EXPECT_EQ(array_stats.per_tensor[t].gap_mean, wire_stats.per_tensor[t].gap_mean) << t;
    }
  }
  EXPECT_EQ(array_engine->version(), wire_engine->version());
  EXPECT_GT(wire_engine->version(), 0u);
}

std::vector<RuleCase> AllRuleCases() {
  std::vector<RuleCase> cases;
  for (RuleKind kind : {RuleKind::kAsgd, RuleKind::kStalenessAware, RuleKind::kGapAware,
                        RuleKind::kDanaZero, RuleKind::kDanaSlim, RuleKind::kGapAwareDana,
                        RuleKind::kDcAsgd, RuleKind::kSync}) {
    for (int threads : {1, 2}) cases.push_back({kind, threads, DType::kFloat32});
    cases.push_back({kind, 2, DType::kBfloat16});
  }
  return cases;
}

std::string CaseName(const ::testing::TestParamInfo<RuleCase>& info) {
  std::string name = RuleKindName(info.param.kind);
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return name + "_" + std::to_string(info.param.threads) + "threads_" +
         DTypeName(info.param.wire);
}

INSTANTIATE_TEST_SUITE_P(AllRules, RuleOverWireTest, ::testing::ValuesIn(AllRuleCases()),
                         CaseName);

}  // namespace
}  // namespace gaptrain
