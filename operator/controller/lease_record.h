// LeaseRecord: the leader-election fields of a coordination.k8s.io/v1 Lease
// (its spec), read from and written into the Lease object as the API
// server holds it (see ../shared/k8s/recorded/lease-*.json).
//
// What callers may rely on:
//   - ParseLeaseRecord accepts a Lease whose spec fields are absent (an
//     empty holder, no times) and fails with INVALID_ARGUMENT naming the
//     field (e.g. "lease default/gaptrain-operator: spec.renewTime: ...")
//     for a field of the wrong type or a time that is not RFC 3339.
//   - SetLeaseRecord writes every field (times as MicroTime,
//     "2026-11-23T06:00:00.000000Z") and leaves the rest of the object,
//     metadata.resourceVersion included, as it was.

#ifndef GAPTRAIN_OPERATOR_CONTROLLER_LEASE_RECORD_H_
#define GAPTRAIN_OPERATOR_CONTROLLER_LEASE_RECORD_H_

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "services/base/status.h"

namespace gaptrain {
namespace controller {

struct LeaseRecord {
  std::string holder_identity;         // "" when nobody holds it
  int64_t lease_duration_seconds = 0;  // 0 when absent
  std::optional<std::chrono::system_clock::time_point> acquire_time;
  std::optional<std::chrono::system_clock::time_point> renew_time;
  int64_t lease_transitions = 0;
};

Status ParseLeaseRecord(const nlohmann::json& lease, LeaseRecord* out);
void SetLeaseRecord(const LeaseRecord& record, nlohmann::json* lease);

}  // namespace controller
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_CONTROLLER_LEASE_RECORD_H_
