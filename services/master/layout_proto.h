// Conversion between ParameterLayout and BufferLayout and their wire form
// (proto ModelLayout's tensors and buffers), used by Describe, the worker's
// flat model and checkpoint headers.

#ifndef GAPTRAIN_SERVICES_MASTER_LAYOUT_PROTO_H_
#define GAPTRAIN_SERVICES_MASTER_LAYOUT_PROTO_H_

#include "proto/gaptrain.pb.h"
#include "services/base/status.h"
#include "services/engine/buffer_layout.h"
#include "services/engine/parameter_layout.h"

namespace gaptrain {

void LayoutToProto(const ParameterLayout& layout, proto::ModelLayout* out);

// Rebuilds a layout from untrusted input; errors name the tensor and field.
// Parameters must be float32.
Status LayoutFromProto(const proto::ModelLayout& in, ParameterLayout* out);

// Sets out->buffers (the rest of *out is kept).
void BufferLayoutToProto(const BufferLayout& layout, proto::ModelLayout* out);

// in.buffers from untrusted input; errors name the buffer and field.
Status BufferLayoutFromProto(const proto::ModelLayout& in, BufferLayout* out);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_MASTER_LAYOUT_PROTO_H_
