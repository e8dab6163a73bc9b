// Conversion between ParameterLayout and its wire form (proto ModelLayout),
// used by Describe, the worker's flat model and checkpoint headers.

#ifndef GAPTRAIN_SERVICES_MASTER_LAYOUT_PROTO_H_
#define GAPTRAIN_SERVICES_MASTER_LAYOUT_PROTO_H_

#include "proto/gaptrain.pb.h"
#include "services/base/status.h"
#include "services/engine/parameter_layout.h"

namespace gaptrain {

void LayoutToProto(const ParameterLayout& layout, proto::ModelLayout* out);

// Rebuilds a layout from untrusted input; errors name the tensor and field.
Status LayoutFromProto(const proto::ModelLayout& in, ParameterLayout* out);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_MASTER_LAYOUT_PROTO_H_
