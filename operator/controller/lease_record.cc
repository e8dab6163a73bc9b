#include "operator/controller/lease_record.h"

#include "operator/controller/object_key.h"
#include "operator/kube/api_time.h"

namespace gaptrain {
namespace controller {

Status ParseLeaseRecord(const nlohmann::json& lease, LeaseRecord* out) {
  const std::string what = "lease " + MakeKey(ObjectNamespace(lease), ObjectName(lease)) + ": ";
  if (!lease.is_object()) return Status::InvalidArgument(what + "not a JSON object");
  *out = LeaseRecord();
  auto spec = lease.find("spec");
  if (spec == lease.end() || spec->is_null()) return Status::OK();
  if (!spec->is_object()) return Status::InvalidArgument(what + "spec: not an object");
  auto bad = [&](const char* field, const char* why) {
    return Status::InvalidArgument(what + "spec." + field + ": " + why);
  };
  auto field = [&](const char* name) -> const nlohmann::json* {
    auto it = spec->find(name);
    return it == spec->end() || it->is_null() ? nullptr : &*it;
  };
  if (const nlohmann::json* holder = field("holderIdentity")) {
    if (!holder->is_string()) return bad("holderIdentity", "not a string");
    out->holder_identity = holder->get<std::string>();
  }
  if (const nlohmann::json* duration = field("leaseDurationSeconds")) {
    if (!duration->is_number_integer()) return bad("leaseDurationSeconds", "not an integer");
    out->lease_duration_seconds = duration->get<int64_t>();
  }
  if (const nlohmann::json* transitions = field("leaseTransitions")) {
    if (!transitions->is_number_integer()) return bad("leaseTransitions", "not an integer");
    out->lease_transitions = transitions->get<int64_t>();
  }
  auto read_time = [&](const char* name,
                       std::optional<std::chrono::system_clock::time_point>* time) {
    const nlohmann::json* value = field(name);
    if (value == nullptr) return Status::OK();
    std::chrono::system_clock::time_point parsed;
    if (!value->is_string() || !kube::ParseRfc3339(value->get<std::string>(), &parsed)) {
      return bad(name, "not an RFC 3339 time");
    }
    *time = parsed;
    return Status::OK();
  };
  GAPTRAIN_RETURN_IF_ERROR(read_time("acquireTime", &out->acquire_time));
  GAPTRAIN_RETURN_IF_ERROR(read_time("renewTime", &out->renew_time));
  return Status::OK();
}

void SetLeaseRecord(const LeaseRecord& record, nlohmann::json* lease) {
  nlohmann::json& spec = (*lease)["spec"];
  if (!spec.is_object()) spec = nlohmann::json::object();
  spec["holderIdentity"] = record.holder_identity;
  spec["leaseDurationSeconds"] = record.lease_duration_seconds;
  if (record.acquire_time) {
    spec["acquireTime"] = kube::FormatMicroTime(*record.acquire_time);
  } else {
    spec.erase("acquireTime");
  }
  if (record.renew_time) {
    spec["renewTime"] = kube::FormatMicroTime(*record.renew_time);
  } else {
    spec.erase("renewTime");
  }
  spec["leaseTransitions"] = record.lease_transitions;
}

}  // namespace controller
}  // namespace gaptrain
