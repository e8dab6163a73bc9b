#include "services/master/layout_proto.h"

#include <gtest/gtest.h>

namespace gaptrain {
namespace {

TEST(LayoutProtoTest, RoundTripsThroughTheWire) {
  ParameterLayout layout;
  ASSERT_TRUE(layout.Add("conv1.weight", {6, 1, 5, 5}).ok());
  ASSERT_TRUE(layout.Add("conv1.bias", {6}).ok());
  ASSERT_TRUE(layout.Add("scale", {}).ok());

  proto::ModelLayout wire;
  LayoutToProto(layout, &wire);
  std::string bytes;
  ASSERT_TRUE(wire.SerializeToString(&bytes));

  proto::ModelLayout parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  ParameterLayout back;
  ASSERT_TRUE(LayoutFromProto(parsed, &back).ok());
  EXPECT_EQ(back, layout);
  EXPECT_EQ(back.size(), 150u + 6u + 1u);
  EXPECT_EQ(back.tensors()[1].offset, 150u);
}

TEST(LayoutProtoTest, RejectsNegativeDimensionNamingTheTensor) {
  proto::ModelLayout wire;
  auto* t = wire.add_tensors();
  t->set_name("fc.weight");
  t->add_shape(10);
  t->add_shape(-3);
  ParameterLayout out;
  Status s = LayoutFromProto(wire, &out);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("fc.weight"), std::string::npos) << s.message();
}

TEST(LayoutProtoTest, RejectsOverflowingShapeAndDuplicateNames) {
  proto::ModelLayout huge;
  auto* t = huge.add_tensors();
  t->set_name("big");
  t->add_shape(int64_t{1} << 40);
  t->add_shape(int64_t{1} << 40);
  ParameterLayout out;
  EXPECT_EQ(LayoutFromProto(huge, &out).code(), Status::Code::kInvalidArgument);

  proto::ModelLayout dup;
  dup.add_tensors()->set_name("w");
  dup.add_tensors()->set_name("w");
  Status s = LayoutFromProto(dup, &out);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("tensors[1]"), std::string::npos) << s.message();
}

TEST(LayoutProtoTest, BuffersRoundTripWithTheirDtypes) {
  ParameterLayout params;
  ASSERT_TRUE(params.Add("bn.weight", {4}).ok());
  BufferLayout buffers;
  ASSERT_TRUE(buffers.Add("bn.running_mean", {4}, BufferDType::kFloat32).ok());
  ASSERT_TRUE(buffers.Add("bn.num_batches_tracked", {}, BufferDType::kInt64).ok());
  ASSERT_TRUE(buffers.Add("mask", {3}, BufferDType::kBool).ok());
  proto::ModelLayout wire;
  LayoutToProto(params, &wire);
  BufferLayoutToProto(buffers, &wire);
  EXPECT_EQ(wire.tensors_size(), 1);
  BufferLayout back;
  ASSERT_TRUE(BufferLayoutFromProto(wire, &back).ok());
  EXPECT_EQ(back, buffers);
  EXPECT_EQ(back.bytes(), 16u + 8u + 3u);
  ParameterLayout params_back;
  ASSERT_TRUE(LayoutFromProto(wire, &params_back).ok());
  EXPECT_EQ(params_back, params);
}

TEST(LayoutProtoTest, RefusesUnknownBufferDtypesAndParametersThatAreNotFloat32) {
  proto::ModelLayout wire;
  auto* b = wire.add_buffers();
  b->set_name("odd");
  b->set_dtype(static_cast<proto::TensorDType>(42));
  BufferLayout buffers;
  Status s = BufferLayoutFromProto(wire, &buffers);
  EXPECT_EQ(s.message(), "layout.buffers[0] ('odd'): unknown dtype 42");
  auto* t = wire.add_tensors();
  t->set_name("w");
  t->set_dtype(proto::TENSOR_DTYPE_INT64);
  ParameterLayout params;
  s = LayoutFromProto(wire, &params);
  EXPECT_EQ(s.message(), "layout.tensors[0] ('w'): parameters must be float32");
}

}  // namespace
}  // namespace gaptrain
