// ManagedFields: field ownership as kube-apiserver records it in
// metadata.managedFields, and server-side apply built on it. A simplified
// but honest model of structured-merge-diff:
//   - A field path is a list of fieldsV1 tokens: "f:spec", "f:containers",
//     "k:{\"name\":\"worker\"}", "f:command". Lists whose shape has keys
//     (containers by name, ownerReferences by uid, ...) are addressed per
//     element; other lists, and maps marked atomic, are single fields.
//   - An Update (create, PUT, merge/JSON patch, subresource writes) gives its
//     manager the fields it added or changed (and the maps it created, the
//     "." entries) and takes them from everyone else.
//   - An Apply owns exactly the fields of the applied configuration. Applying
//     a field another manager owns with a different value is a conflict
//     (409 with a FieldManagerConflict cause per field) unless forced, which
//     moves the ownership. Fields the applier owned before and omits now are
//     removed from the object unless another manager owns them. Maps merge
//     recursively, keyed lists merge by key, other lists are replaced.
//   - Entries are sorted as the real server sorts them (Apply before Update,
//     then by time, manager, subresource); a manager's time changes only
//     when its write changed something.
// Paths never include apiVersion, kind or the metadata fields the server
// owns (name, namespace, uid, resourceVersion, generation, timestamps).

#ifndef GAPTRAIN_OPERATOR_TESTING_MANAGED_FIELDS_H_
#define GAPTRAIN_OPERATOR_TESTING_MANAGED_FIELDS_H_

#include <nlohmann/json.hpp>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "operator/testing/api_error.h"
#include "services/common/status.h"

namespace gaptrain {
namespace kube_testing {

using FieldPath = std::vector<std::string>;
using FieldSet = std::set<FieldPath>;

// How apply treats the value at a path of property names ({"spec",
// "containers"}; list elements are implied).
struct FieldShape {
  bool atomic = false;                 // one field, never merged
  std::vector<std::string> list_keys;  // a list merged element by element
  bool atomic_elements = false;        // keyed elements that are one field each
};
using ShapeFunction = std::function<FieldShape(const std::vector<std::string>& names)>;

// fieldsV1 encoding and decoding.
nlohmann::json EncodeFieldsV1(const FieldSet& fields);
Status DecodeFieldsV1(const nlohmann::json& fields_v1, FieldSet* out);
// ".spec.containers[name=\"worker\"].command", as conflict causes name a field.
std::string FieldPathString(const FieldPath& path);

class ManagedFields {
 public:
  struct Entry {
    std::string manager;
    std::string operation;  // "Apply" or "Update"
    std::string api_version;
    std::string time;  // RFC 3339
    std::string subresource;
    FieldSet fields;
  };

  // From metadata.managedFields (absent or null: none). INVALID_ARGUMENT
  // names the malformed entry.
  static Status Decode(const nlohmann::json& managed_fields, ManagedFields* out);
  // Sorted entries; an empty array when there are none.
  nlohmann::json Encode() const;
  bool empty() const { return entries_.empty(); }
  const std::vector<Entry>& entries() const { return entries_; }

  // Records that `manager` changed `before` into `after` (an Update).
  void RecordUpdate(const std::string& manager, const std::string& subresource,
                    const std::string& api_version, const std::string& now,
                    const nlohmann::json& before, const nlohmann::json& after,
                    const ShapeFunction& shape);

  // Server-side apply of `applied` by `manager` onto `live` (an object, or
  // an empty object for a create). Sets *merged to the resulting object
  // (before the server's defaults) or returns the 409 conflict.
  ApiError Apply(const std::string& manager, bool force, const std::string& subresource,
                 const std::string& api_version, const std::string& now,
                 const nlohmann::json& live, const nlohmann::json& applied,
                 const ShapeFunction& shape, nlohmann::json* merged);

  // Drops the entries written through `subresource`, keeping what they
  // took from others: kube-apiserver v1.26 records a write through /scale
  // that way (the replicas field loses its owner, no scale entry appears).
  void ForgetSubresource(const std::string& subresource);

  // Drops ownership of fields `object` no longer has, and empty entries.
  void ForgetMissingFields(const nlohmann::json& object);

  // Equal entries and field sets, ignoring times.
  bool SameOwnership(const ManagedFields& other) const;

 private:
  Entry* Find(const std::string& manager, const std::string& operation,
              const std::string& subresource);

  std::vector<Entry> entries_;
};

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_MANAGED_FIELDS_H_
