// StructuralSchema: a CustomResourceDefinition version's openAPIV3Schema,
// applied to custom resources the way kube-apiserver v1.26 does on every
// create and update:
//   1. Prune: fields the schema does not declare are dropped (unless
//      x-kubernetes-preserve-unknown-fields), and reported as warnings
//      ("unknown field \"spec.staleness\""); nulls of non-nullable fields
//      are dropped too.
//   2. Default: absent properties with a `default` are filled in wherever
//      their parent object exists (spec.model.builtin only when spec.model
//      is there).
//   3. Validate: type, enum, minimum/maximum (exclusive too), min/maxLength,
//      pattern, min/maxItems, required, and the date-time/date formats, with
//      the real server's causes ("Invalid value: 0: spec.workers.replicas in
//      body should be greater than or equal to 1").
// apiVersion, kind and metadata at the root are left to the caller.
//
// The schema also answers how server-side apply treats a list or map
// (x-kubernetes-list-type, x-kubernetes-list-map-keys, x-kubernetes-map-type).
// Thread-compatible: const methods may be called concurrently.

#ifndef GAPTRAIN_OPERATOR_TESTING_STRUCTURAL_SCHEMA_H_
#define GAPTRAIN_OPERATOR_TESTING_STRUCTURAL_SCHEMA_H_

#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "operator/testing/api_error.h"
#include "services/common/status.h"

namespace gaptrain {
namespace kube_testing {

struct SchemaNode;  // one node of the parsed schema (structural_schema.cc)

class StructuralSchema {
 public:
  // Parses an openAPIV3Schema object. INVALID_ARGUMENT names the path of a
  // malformed node (a `type` that is not a string, properties that are not
  // an object, ...).
  static Status Parse(const nlohmann::json& open_api_v3_schema,
                      std::unique_ptr<StructuralSchema>* out);

  // Steps 1 to 3 above on a whole custom resource. Unknown field paths are
  // appended to *unknown_fields.
  void Prune(nlohmann::json* object, std::vector<std::string>* unknown_fields) const;
  void ApplyDefaults(nlohmann::json* object) const;
  void Validate(const nlohmann::json& object, std::vector<StatusCause>* causes) const;

  // How server-side apply treats the field at `path` (property names from
  // the root, e.g. {"status", "conditions"}).
  struct Shape {
    bool atomic = false;                 // x-kubernetes-map-type/list-type: atomic
    std::vector<std::string> list_keys;  // x-kubernetes-list-type: map
    bool set = false;                    // x-kubernetes-list-type: set
  };
  Shape ShapeAt(const std::vector<std::string>& path) const;

 private:
  explicit StructuralSchema(std::shared_ptr<const SchemaNode> root) : root_(std::move(root)) {}

  std::shared_ptr<const SchemaNode> root_;
};

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_STRUCTURAL_SCHEMA_H_
