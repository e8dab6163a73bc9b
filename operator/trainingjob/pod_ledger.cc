#include "operator/trainingjob/pod_ledger.h"

#include "operator/trainingjob/object_fields.h"

namespace gaptrain {
namespace trainingjob {
namespace {

using nlohmann::json;

uint64_t Count(const json& object, FieldPath path) {
  const std::optional<int64_t> v = IntegerAt(object, path);
  return v && *v > 0 ? static_cast<uint64_t>(*v) : 0;
}

bool ReadUids(const json& ledger, const char* key, std::set<std::string>* out) {
  const json* list = FieldAt(ledger, {key});
  if (list == nullptr) return true;
  if (!list->is_array()) return false;
  for (const json& uid : *list) {
    if (!uid.is_string()) return false;
    out->insert(uid.get<std::string>());
  }
  return true;
}

}  // namespace

PodLedger ReadPodLedger(const json& job) {
  const std::string text = StringAt(job, {"metadata", "annotations", kPodLedgerAnnotation});
  if (!text.empty()) {
    const json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
    PodLedger ledger;
    if (parsed.is_object() && ReadUids(parsed, "counted", &ledger.counted) &&
        ReadUids(parsed, "released", &ledger.released)) {
      ledger.preemptions = Count(parsed, {"preemptions"});
      ledger.failures = Count(parsed, {"failures"});
      ledger.restarts = Count(parsed, {"restarts"});
      return ledger;
    }
  }
  PodLedger from_status;
  from_status.preemptions = Count(job, {"status", "preemptions"});
  from_status.failures = Count(job, {"status", "failures"});
  from_status.restarts = Count(job, {"status", "restarts"});
  return from_status;
}

std::string PodLedgerText(const PodLedger& ledger) {
  json j = json::object();
  j["preemptions"] = ledger.preemptions;
  j["failures"] = ledger.failures;
  j["restarts"] = ledger.restarts;
  j["counted"] = ledger.counted;
  j["released"] = ledger.released;
  return j.dump();
}

void PruneLedger(const std::set<std::string>& observed_uids, PodLedger* ledger) {
  for (std::set<std::string>* uids : {&ledger->counted, &ledger->released}) {
    for (auto it = uids->begin(); it != uids->end();) {
      it = observed_uids.count(*it) > 0 ? std::next(it) : uids->erase(it);
    }
  }
}

}  // namespace trainingjob
}  // namespace gaptrain
