// ModelDeclaration: a trainer's model as it declares it to the master
// (spec.model.fromTrainer; proto ModelDeclaration): the parameters' layout
// and initial values, the buffers' layout and values. The master adopts
// the first one it receives as the job's model, and checks every later
// one against it.

#ifndef GAPTRAIN_SERVICES_MASTER_MODEL_DECLARATION_H_
#define GAPTRAIN_SERVICES_MASTER_MODEL_DECLARATION_H_

#include <string>
#include <vector>

#include "proto/gaptrain.pb.h"
#include "services/base/status.h"
#include "services/engine/buffer_layout.h"
#include "services/engine/parameter_layout.h"

namespace gaptrain {

struct DeclaredModel {
  ParameterLayout layout;
  std::vector<float> values;  // layout.size() initial parameters
  BufferLayout buffer_layout;
  std::string buffer_values;  // buffer_layout.bytes()
};

// Builds a DeclaredModel from a declaration's messages, as they arrive.
// Every message is validated against what came before (untrusted input):
// the layout must rebuild (layout_proto.h's limits) and come first only;
// the slices must follow each other from offset 0 with whole float32
// values, finite ones; the buffers' values must fit their layout. Errors
// are INVALID_ARGUMENT naming the field.
class DeclarationAssembler {
 public:
  Status Add(const proto::ModelDeclaration& message);
  // Once the stream ended: the model, when every value arrived.
  Status Finish(DeclaredModel* out);

 private:
  bool started_ = false;
  uint64_t total_ = 0;
  DeclaredModel model_;
};

// "" when `declared` is `held`'s model, else its first difference ("tensor
// 3 is ... in the declaration, ... on the master").
std::string DeclarationDifference(const DeclaredModel& declared, const ParameterLayout& held,
                                  const BufferLayout& held_buffers);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_MASTER_MODEL_DECLARATION_H_
