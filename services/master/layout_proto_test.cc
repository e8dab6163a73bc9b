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

}  // namespace
}  // namespace gaptrain
