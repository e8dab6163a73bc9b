// Conversions between the coordinator core's types and their protobuf
// forms (proto/gaptrain.proto): enums, tasks, conditions, and the Status
// reply. Kept apart so the core's verbs speak plain C++.

#ifndef GAPTRAIN_SERVICES_COORDINATOR_COORDINATOR_PROTO_H_
#define GAPTRAIN_SERVICES_COORDINATOR_COORDINATOR_PROTO_H_

#include "proto/gaptrain.pb.h"
#include "services/base/status.h"
#include "services/coordinator/coordinator_state.h"

namespace gaptrain {

proto::JobPhase ToProto(JobPhase phase);
// INVALID_ARGUMENT for UNSPECIFIED or an unknown value.
Status FromProto(proto::JobPhase phase, JobPhase* out);

proto::WorkerRole ToProto(WorkerRole role);
// UNSPECIFIED means trainer; an unknown value is INVALID_ARGUMENT.
Status FromProto(int role, WorkerRole* out);

// UNSPECIFIED or an unknown value is INVALID_ARGUMENT.
Status FromProto(int reason, LeaveReason* out);
// UNSPECIFIED or an unknown value is INVALID_ARGUMENT.
Status FromProto(int reason, ReleaseReason* out);

void ToProto(const DataTask& task, proto::DataTask* out);
void ToProto(const JobCondition& condition, proto::JobCondition* out);
JobCondition FromProto(const proto::JobCondition& condition);
void ToProto(const DataUnavailable& data, proto::DataUnavailable* out);
void ToProto(const MasterRun& run, proto::MasterIncarnation* out);
MasterRun FromProto(const proto::MasterIncarnation& run);
ShardTotals FromProto(const proto::MasterTotals& totals);
void ToProto(const MasterPosition& position, proto::MasterPosition* out);
// A position from a worker that predates shards (no shard) is shard 0's.
MasterPosition FromProto(const proto::MasterPosition& position);
DataUnavailable FromProto(const proto::DataUnavailable& data);

void ToProto(const JobStatus& status, proto::CoordinatorStatusResponse* out);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_COORDINATOR_COORDINATOR_PROTO_H_
