#include "services/master/model_declaration.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "services/master/layout_proto.h"

namespace gaptrain {
namespace {

std::string Floats(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// fc.weight [2, 2], fc.bias [2], and a batch count; the values in two messages.
std::vector<proto::ModelDeclaration> Declaration() {
  ParameterLayout layout;
  EXPECT_TRUE(layout.Add("fc.weight", {2, 2}).ok());
  EXPECT_TRUE(layout.Add("fc.bias", {2}).ok());
  BufferLayout buffers;
  EXPECT_TRUE(buffers.Add("bn.num_batches_tracked", {}, BufferDType::kInt64).ok());
  std::vector<proto::ModelDeclaration> messages(2);
  LayoutToProto(layout, messages[0].mutable_layout());
  BufferLayoutToProto(buffers, messages[0].mutable_layout());
  messages[0].set_buffer_values(std::string(8, '\0'));
  for (auto& m : messages) {
    m.set_worker_id(3);
    m.set_total_values(6);
  }
  messages[0].set_values(Floats({1, 2, 3, 4}));
  messages[1].set_offset(4);
  messages[1].set_values(Floats({5, 6}));
  return messages;
}

Status Assemble(const std::vector<proto::ModelDeclaration>& messages, DeclaredModel* out) {
  DeclarationAssembler assembler;
  for (const auto& m : messages) GAPTRAIN_RETURN_IF_ERROR(assembler.Add(m));
  return assembler.Finish(out);
}

TEST(ModelDeclarationTest, AssemblesTheLayoutValuesAndBuffers) {
  DeclaredModel model;
  ASSERT_TRUE(Assemble(Declaration(), &model).ok());
  EXPECT_EQ(model.layout.size(), 6u);
  EXPECT_EQ(model.values, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(model.buffer_layout.buffers()[0].name, "bn.num_batches_tracked");
  EXPECT_EQ(model.buffer_values.size(), 8u);
  EXPECT_EQ(DeclarationDifference(model, model.layout, model.buffer_layout), "");
  ParameterLayout other;
  ASSERT_TRUE(other.Add("fc.weight", {2, 3}).ok());
  EXPECT_EQ(DeclarationDifference(model, other, model.buffer_layout),
            "tensor 0 is fc.weight [2, 2] in the declaration, fc.weight [2, 3] on the master");
  EXPECT_EQ(DeclarationDifference(model, model.layout, BufferLayout()),
            "1 buffers in the declaration, 0 on the master");
}

TEST(ModelDeclarationTest, RefusesWhatDoesNotFitNamingTheField) {
  struct Case {
    const char* want;
    std::function<void(std::vector<proto::ModelDeclaration>*)> spoil;
  };
  const Case cases[] = {
      {"the first message carries no layout", [](auto* m) { (*m)[0].clear_layout(); }},
      {"total_values 7, the layout has 6", [](auto* m) { (*m)[0].set_total_values(7); }},
      {"buffer_values: 4 bytes, the buffers hold 8",
       [](auto* m) { (*m)[0].set_buffer_values(std::string(4, '\0')); }},
      {"only the first message carries the layout",
       [](auto* m) { *(*m)[1].mutable_layout() = (*m)[0].layout(); }},
      {"offset 5, expected 4", [](auto* m) { (*m)[1].set_offset(5); }},
      {"not whole float32 values", [](auto* m) { (*m)[1].set_values("abc"); }},
      {"values beyond the layout's 6", [](auto* m) { (*m)[1].set_values(Floats({5, 6, 7})); }},
      {"fc.bias[1] is not finite",
       [](auto* m) { (*m)[1].set_values(Floats({5, std::nanf("")})); }},
      {"5 of 6 values arrived", [](auto* m) { (*m)[1].set_values(Floats({5})); }},
      {"parameters must be float32",
       [](auto* m) { (*m)[0].mutable_layout()->mutable_tensors(0)->set_dtype(proto::TENSOR_DTYPE_INT64); }},
  };
  for (const Case& c : cases) {
    std::vector<proto::ModelDeclaration> messages = Declaration();
    c.spoil(&messages);
    DeclaredModel model;
    const Status s = Assemble(messages, &model);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << c.want;
    EXPECT_NE(s.message().find(c.want), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace gaptrain
