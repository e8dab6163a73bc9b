#include "operator/controller/lease_record.h"

#include <cctype>
#include <ctime>

#include "operator/controller/object_key.h"
#include "operator/kube/event.h"

namespace gaptrain {
namespace controller {

namespace {

// Reads `count` digits at text[*pos], advancing *pos.
bool Digits(const std::string& text, size_t* pos, int count, int* value) {
  if (*pos + count > text.size()) return false;
  *value = 0;
  for (int i = 0; i < count; ++i) {
    const char c = text[*pos + i];
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    *value = *value * 10 + (c - '0');
  }
  *pos += count;
  return true;
}

bool Expect(const std::string& text, size_t* pos, char c) {
  if (*pos >= text.size() || text[*pos] != c) return false;
  ++*pos;
  return true;
}

}  // namespace

bool ParseRfc3339(const std::string& text, std::chrono::system_clock::time_point* out) {
  size_t pos = 0;
  int year, month, day, hour, minute, second;
  if (!Digits(text, &pos, 4, &year) || !Expect(text, &pos, '-') || !Digits(text, &pos, 2, &month) ||
      !Expect(text, &pos, '-') || !Digits(text, &pos, 2, &day) ||
      !(Expect(text, &pos, 'T') || Expect(text, &pos, 't')) || !Digits(text, &pos, 2, &hour) ||
      !Expect(text, &pos, ':') || !Digits(text, &pos, 2, &minute) || !Expect(text, &pos, ':') ||
      !Digits(text, &pos, 2, &second)) {
    return false;
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) {
    return false;
  }
  std::chrono::nanoseconds fraction{0};
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    int64_t nanos = 0;
    int digits = 0;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
      if (digits < 9) nanos = nanos * 10 + (text[pos] - '0');
      ++digits;
      ++pos;
    }
    if (digits == 0) return false;
    for (int i = digits; i < 9; ++i) nanos *= 10;
    fraction = std::chrono::nanoseconds(nanos);
  }
  int offset_seconds = 0;
  if (Expect(text, &pos, 'Z') || Expect(text, &pos, 'z')) {
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    const int sign = text[pos] == '-' ? -1 : 1;
    ++pos;
    int oh, om;
    if (!Digits(text, &pos, 2, &oh) || !Expect(text, &pos, ':') || !Digits(text, &pos, 2, &om) ||
        oh > 23 || om > 59) {
      return false;
    }
    offset_seconds = sign * (oh * 3600 + om * 60);
  } else {
    return false;
  }
  if (pos != text.size()) return false;
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  const std::time_t seconds = timegm(&tm);
  if (tm.tm_mday != day) return false;  // 2026-02-31 normalised to March
  *out = std::chrono::system_clock::from_time_t(seconds - offset_seconds) +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(fraction);
  return true;
}

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
    if (!value->is_string() || !ParseRfc3339(value->get<std::string>(), &parsed)) {
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
