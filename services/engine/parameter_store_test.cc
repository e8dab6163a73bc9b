#include "services/engine/parameter_store.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "services/engine/flat_buffer.h"
#include "services/engine/parameter_layout.h"
#include "services/numeric/bfloat16.h"

namespace gaptrain {
namespace {

using Code = Status::Code;

// ---------------------------------------------------------------- layout

ParameterLayout ThreeTensors() {
  ParameterLayout layout;
  EXPECT_TRUE(layout.Add("conv1.weight", {6, 1, 5, 5}).ok());  // 150
  EXPECT_TRUE(layout.Add("conv1.bias", {6}).ok());             // 6
  EXPECT_TRUE(layout.Add("fc.weight", {10, 7}).ok());          // 70
  return layout;
}

TEST(ParameterLayoutTest, EmptyLayout) {
  ParameterLayout layout;
  EXPECT_EQ(layout.size(), 0u);
  EXPECT_EQ(layout.num_tensors(), 0u);
  EXPECT_TRUE(layout.tensors().empty());
}

TEST(ParameterLayoutTest, PacksTensorsBackToBack) {
  ParameterLayout layout = ThreeTensors();
  ASSERT_EQ(layout.num_tensors(), 3u);
  EXPECT_EQ(layout.size(), 226u);
  const auto& t = layout.tensors();
  EXPECT_EQ(t[0].name, "conv1.weight");
  EXPECT_EQ(t[0].shape, (std::vector<int64_t>{6, 1, 5, 5}));
  EXPECT_EQ(t[0].offset, 0u);
  EXPECT_EQ(t[0].size, 150u);
  EXPECT_EQ(t[1].name, "conv1.bias");
  EXPECT_EQ(t[1].offset, 150u);
  EXPECT_EQ(t[1].size, 6u);
  EXPECT_EQ(t[2].name, "fc.weight");
  EXPECT_EQ(t[2].offset, 156u);
  EXPECT_EQ(t[2].size, 70u);
}

TEST(ParameterLayoutTest, ScalarAndZeroSizedTensors) {
  ParameterLayout layout;
  ASSERT_TRUE(layout.Add("scale", {}).ok());      // a scalar: 1 element
  ASSERT_TRUE(layout.Add("empty", {4, 0}).ok());  // 0 elements
  ASSERT_TRUE(layout.Add("w", {3}).ok());
  ASSERT_EQ(layout.num_tensors(), 3u);
  EXPECT_EQ(layout.tensors()[0].size, 1u);
  EXPECT_EQ(layout.tensors()[1].offset, 1u);
  EXPECT_EQ(layout.tensors()[1].size, 0u);
  EXPECT_EQ(layout.tensors()[2].offset, 1u);
  EXPECT_EQ(layout.size(), 4u);
  // The zero-sized tensor owns no element.
  EXPECT_EQ(layout.TensorIndexOf(0), 0u);
  EXPECT_EQ(layout.TensorIndexOf(1), 2u);
  EXPECT_EQ(layout.TensorIndexOf(3), 2u);
}

TEST(ParameterLayoutTest, RejectsEmptyName) {
  ParameterLayout layout = ThreeTensors();
  Status s = layout.Add("", {3});
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_FALSE(s.message().empty());
  EXPECT_EQ(layout.num_tensors(), 3u);  // unchanged
  EXPECT_EQ(layout.size(), 226u);
}

TEST(ParameterLayoutTest, RejectsDuplicateName) {
  ParameterLayout layout = ThreeTensors();
  Status s = layout.Add("conv1.bias", {2});
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("conv1.bias"), std::string::npos) << s.message();
  EXPECT_EQ(layout.num_tensors(), 3u);
  EXPECT_EQ(layout.size(), 226u);
}

TEST(ParameterLayoutTest, RejectsNegativeDimension) {
  ParameterLayout layout = ThreeTensors();
  Status s = layout.Add("bad", {3, -2});
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("bad"), std::string::npos) << s.message();
  EXPECT_EQ(layout.num_tensors(), 3u);
  EXPECT_EQ(layout.size(), 226u);
  // The failed name is still free afterwards.
  EXPECT_TRUE(layout.Add("bad", {3, 2}).ok());
  EXPECT_EQ(layout.tensors()[3].offset, 226u);
  EXPECT_EQ(layout.size(), 232u);
}

TEST(ParameterLayoutTest, TensorIndexOfEveryElement) {
  ParameterLayout layout = ThreeTensors();
  for (size_t i = 0; i < layout.size(); ++i) {
    size_t expected = i < 150 ? 0 : (i < 156 ? 1 : 2);
    ASSERT_EQ(layout.TensorIndexOf(i), expected) << "element " << i;
  }
  EXPECT_EQ(layout.TensorIndexOf(149), 0u);
  EXPECT_EQ(layout.TensorIndexOf(150), 1u);
  EXPECT_EQ(layout.TensorIndexOf(155), 1u);
  EXPECT_EQ(layout.TensorIndexOf(156), 2u);
  EXPECT_EQ(layout.TensorIndexOf(225), 2u);
}

TEST(ParameterLayoutTest, Equality) {
  ParameterLayout a = ThreeTensors();
  ParameterLayout b = ThreeTensors();
  EXPECT_TRUE(a == b);
  EXPECT_FALSE(a != b);

  ParameterLayout other_shape;
  ASSERT_TRUE(other_shape.Add("conv1.weight", {6, 1, 5, 5}).ok());
  ASSERT_TRUE(other_shape.Add("conv1.bias", {6}).ok());
  ASSERT_TRUE(other_shape.Add("fc.weight", {7, 10}).ok());  // same size, other shape
  EXPECT_FALSE(a == other_shape);
  EXPECT_TRUE(a != other_shape);

  ParameterLayout other_name;
  ASSERT_TRUE(other_name.Add("conv1.weight", {6, 1, 5, 5}).ok());
  ASSERT_TRUE(other_name.Add("conv1.bias", {6}).ok());
  ASSERT_TRUE(other_name.Add("fc.w", {10, 7}).ok());
  EXPECT_TRUE(a != other_name);

  ParameterLayout shorter;
  ASSERT_TRUE(shorter.Add("conv1.weight", {6, 1, 5, 5}).ok());
  EXPECT_TRUE(a != shorter);
  EXPECT_TRUE(shorter != a);
}

// ------------------------------------------------------------ FlatBuffer

bool Aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % FlatBuffer::kAlignment == 0;
}

TEST(FlatBufferTest, DTypeHelpers) {
  EXPECT_EQ(DTypeSize(DType::kFloat32), 4u);
  EXPECT_EQ(DTypeSize(DType::kBfloat16), 2u);
  EXPECT_STREQ(DTypeName(DType::kFloat32), "fp32");
  EXPECT_STREQ(DTypeName(DType::kBfloat16), "bf16");
  EXPECT_EQ(FlatBuffer::kAlignment, 64u);
}

TEST(FlatBufferTest, DefaultIsEmpty) {
  FlatBuffer b;
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(b.bytes(), 0u);
  EXPECT_EQ(b.dtype(), DType::kFloat32);
}

TEST(FlatBufferTest, SizesAlignmentAndZeroFill) {
  for (DType dtype : {DType::kFloat32, DType::kBfloat16}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{3}, size_t{16}, size_t{17},
                     size_t{33}, size_t{1000}, size_t{4097}}) {
      SCOPED_TRACE(std::string(DTypeName(dtype)) + " n=" + std::to_string(n));
      // Dirty the heap first so a buffer that is not zeroed is likely to show it.
      {
        std::vector<FlatBuffer> junk;
        for (int i = 0; i < 4; ++i) {
          junk.emplace_back(dtype, n);
          std::memset(junk.back().data(), 0xA5, junk.back().bytes());
        }
      }
      FlatBuffer b(dtype, n);
      EXPECT_EQ(b.dtype(), dtype);
      EXPECT_EQ(b.size(), n);
      EXPECT_EQ(b.bytes(), n * DTypeSize(dtype));
      ASSERT_NE(b.data(), nullptr);
      EXPECT_TRUE(Aligned(b.data()));
      const unsigned char* bytes = static_cast<const unsigned char*>(b.data());
      for (size_t i = 0; i < b.bytes(); ++i) ASSERT_EQ(bytes[i], 0) << "byte " << i;
      if (dtype == DType::kFloat32) {
        EXPECT_EQ(static_cast<const void*>(b.f32()), b.data());
      } else {
        EXPECT_EQ(static_cast<const void*>(b.bf16()), b.data());
      }
    }
  }
}

TEST(FlatBufferTest, FillFloat32) {
  FlatBuffer b(DType::kFloat32, 37);
  b.Fill(0.1f);
  for (size_t i = 0; i < b.size(); ++i) ASSERT_EQ(b.f32()[i], 0.1f);
}

TEST(FlatBufferTest, FillBf16Rounds) {
  FlatBuffer b(DType::kBfloat16, 37);
  b.Fill(0.1f);
  for (size_t i = 0; i < b.size(); ++i) ASSERT_EQ(b.bf16()[i], 0x3DCD);
}

TEST(FlatBufferTest, CopyFromFloat32IsExact) {
  const size_t n = 101;
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = std::sin(0.37f * i) * 100.0f;
  FlatBuffer b(DType::kFloat32, n);
  b.CopyFrom(values.data());
  EXPECT_EQ(std::memcmp(b.f32(), values.data(), n * sizeof(float)), 0);
}

TEST(FlatBufferTest, CopyFromBf16RoundsToNearestEven) {
  const std::vector<float> values = {
      1.0f,
      1.0f + 1.0f / 256.0f,                   // tie -> even 0x3F80
      1.0f + 3.0f / 256.0f,                   // tie -> even 0x3F82
      1.0f + 1.0f / 256.0f + 1.0f / 65536.0f, // above tie -> 0x3F81
      -2.25f,
      0.1f,
      3.14159265f,
  };
  const std::vector<bf16_t> expected = {0x3F80, 0x3F80, 0x3F82, 0x3F81,
                                        0xC010, 0x3DCD, 0x4049};
  FlatBuffer b(DType::kBfloat16, values.size());
  b.CopyFrom(values.data());
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(b.bf16()[i], expected[i]) << "element " << i;
  }
}

TEST(FlatBufferTest, CopyFromBf16LargeMatchesScalar) {
  const size_t n = 1000;
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = std::cos(0.11f * i) * (1.0f + i);
  FlatBuffer b(DType::kBfloat16, n);
  b.CopyFrom(values.data());
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(b.bf16()[i], FloatToBf16(values[i])) << i;
}

TEST(FlatBufferTest, MoveTransfersOwnership) {
  FlatBuffer a(DType::kFloat32, 10);
  a.Fill(2.5f);
  const void* p = a.data();
  FlatBuffer b(std::move(a));
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(b.size(), 10u);
  EXPECT_EQ(b.f32()[9], 2.5f);

  FlatBuffer c(DType::kBfloat16, 3);
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(c.dtype(), DType::kFloat32);
  EXPECT_EQ(c.size(), 10u);
}

// --------------------------------------------------------- ParameterStore

TEST(ParameterStoreTest, WorkerStateName) {
  EXPECT_EQ(WorkerStateName(3, "copy"), "worker/3/copy");
  EXPECT_EQ(WorkerStateName(0, "momentum"), "worker/0/momentum");
  EXPECT_EQ(WorkerStateName(4294967295u, "v"), "worker/4294967295/v");
}

TEST(ParameterStoreTest, FreshStore) {
  ParameterStore store(ThreeTensors());
  EXPECT_EQ(store.size(), 226u);
  EXPECT_TRUE(store.layout() == ThreeTensors());
  EXPECT_EQ(store.version(), 0u);
  ASSERT_NE(store.params(), nullptr);
  EXPECT_TRUE(Aligned(store.params()));
  for (size_t i = 0; i < store.size(); ++i) ASSERT_EQ(store.params()[i], 0.0f);
  EXPECT_TRUE(store.buffers().empty());
  EXPECT_TRUE(store.scalars().empty());
  EXPECT_EQ(store.MemoryBytes(), 226u * 4u);
}

TEST(ParameterStoreTest, ParamsAreWritable) {
  ParameterStore store(ThreeTensors());
  for (size_t i = 0; i < store.size(); ++i) store.params()[i] = 0.5f * i;
  const ParameterStore& cstore = store;
  for (size_t i = 0; i < store.size(); ++i) ASSERT_EQ(cstore.params()[i], 0.5f * i);
  store.set_version(42);
  EXPECT_EQ(store.version(), 42u);
}

TEST(ParameterStoreTest, Buffers) {
  ParameterStore store(ThreeTensors());
  const size_t p = store.size();
  EXPECT_EQ(store.buffer("momentum"), nullptr);

  FlatBuffer* m = store.AddBuffer("momentum", DType::kFloat32);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->size(), p);
  EXPECT_EQ(m->dtype(), DType::kFloat32);
  EXPECT_TRUE(Aligned(m->data()));
  for (size_t i = 0; i < p; ++i) ASSERT_EQ(m->f32()[i], 0.0f);
  EXPECT_EQ(store.buffer("momentum"), m);
  const ParameterStore& cstore = store;
  EXPECT_EQ(cstore.buffer("momentum"), m);
  EXPECT_EQ(cstore.buffer("nothing"), nullptr);

  FlatBuffer* copy = store.AddBuffer(WorkerStateName(1, "copy"), DType::kBfloat16);
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->size(), p);
  EXPECT_EQ(copy->dtype(), DType::kBfloat16);
  EXPECT_EQ(store.buffers().size(), 2u);
  EXPECT_EQ(store.buffers().count("worker/1/copy"), 1u);

  // Adding under an existing name replaces it with a fresh zero buffer.
  m->Fill(3.0f);
  FlatBuffer* m2 = store.AddBuffer("momentum", DType::kBfloat16);
  ASSERT_NE(m2, nullptr);
  EXPECT_EQ(m2->dtype(), DType::kBfloat16);
  for (size_t i = 0; i < p; ++i) ASSERT_EQ(m2->bf16()[i], 0);
  EXPECT_EQ(store.buffers().size(), 2u);

  store.RemoveBuffer("momentum");
  EXPECT_EQ(store.buffer("momentum"), nullptr);
  EXPECT_EQ(store.buffers().size(), 1u);
  // Removing an absent buffer is harmless.
  store.RemoveBuffer("momentum");
  EXPECT_EQ(store.buffers().size(), 1u);
  // The other buffer is still there, at the same address.
  EXPECT_EQ(store.buffer("worker/1/copy"), copy);
}

TEST(ParameterStoreTest, Scalars) {
  ParameterStore store(ThreeTensors());
  EXPECT_EQ(store.scalar("eta_max"), 0.0);
  EXPECT_TRUE(store.scalars().empty());  // reading does not create
  store.set_scalar("eta_max", 0.1);
  store.set_scalar("k", 7);
  EXPECT_EQ(store.scalar("eta_max"), 0.1);
  EXPECT_EQ(store.scalar("k"), 7.0);
  store.set_scalar("eta_max", 0.05);
  EXPECT_EQ(store.scalar("eta_max"), 0.05);
  EXPECT_EQ(store.scalars().size(), 2u);
  // Scalars cost no counted memory.
  EXPECT_EQ(store.MemoryBytes(), 226u * 4u);
}

TEST(ParameterStoreTest, MemoryBytesCountsParamsAndBuffers) {
  ParameterStore store(ThreeTensors());
  const size_t p = store.size();
  EXPECT_EQ(store.MemoryBytes(), 4 * p);
  store.AddBuffer("momentum", DType::kFloat32);
  EXPECT_EQ(store.MemoryBytes(), 8 * p);
  store.AddBuffer(WorkerStateName(0, "copy"), DType::kBfloat16);
  store.AddBuffer(WorkerStateName(1, "copy"), DType::kBfloat16);
  EXPECT_EQ(store.MemoryBytes(), 8 * p + 2 * 2 * p);
  store.AddBuffer(WorkerStateName(1, "copy"), DType::kFloat32);  // replaced
  EXPECT_EQ(store.MemoryBytes(), 8 * p + 2 * p + 4 * p);
  store.RemoveBuffer(WorkerStateName(0, "copy"));
  EXPECT_EQ(store.MemoryBytes(), 8 * p + 4 * p);
  store.RemoveBuffer(WorkerStateName(1, "copy"));
  store.RemoveBuffer("momentum");
  EXPECT_EQ(store.MemoryBytes(), 4 * p);
}

TEST(ParameterStoreTest, EmptyLayoutStore) {
  ParameterStore store{ParameterLayout()};
  EXPECT_EQ(store.size(), 0u);
  EXPECT_EQ(store.MemoryBytes(), 0u);
  FlatBuffer* b = store.AddBuffer("x", DType::kFloat32);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->size(), 0u);
  EXPECT_EQ(store.MemoryBytes(), 0u);
}

}  // namespace
}  // namespace gaptrain
