// ResourceType: everything the fake API server knows about one served
// resource: where it lives (group, version, plural), what it is called
// (kind, list kind, short names), and how kube-apiserver treats it
// (namespaced or not, status and scale subresources, whether
// metadata.generation is tracked, whether DELETE returns the object, the
// kind-specific rules in kind_rules.h, and for custom resources the CRD's
// schema and printer columns).
//
// Objects of a type are stored under key() ("pods",
// "trainingjobs.gaptrain.io"), independent of the version.

#ifndef GAPTRAIN_OPERATOR_TESTING_RESOURCE_TYPE_H_
#define GAPTRAIN_OPERATOR_TESTING_RESOURCE_TYPE_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "operator/testing/structural_schema.h"

namespace gaptrain {
namespace kube_testing {

// The behaviour beyond the generic registry that a kind needs
// (defaults, validation, graceful deletion; see kind_rules.h).
enum class KindRules {
  kGeneric,
  kPod,
  kService,
  kSecret,
  kPersistentVolumeClaim,
  kEvent,
  kLease,
  kCustomResourceDefinition,
  kCustomResource,
};

// A CRD's scale subresource; paths are split (".spec.workers.replicas" ->
// {"spec", "workers", "replicas"}); an empty label_selector_path means none.
struct ScaleSubresource {
  std::vector<std::string> spec_replicas_path;
  std::vector<std::string> status_replicas_path;
  std::vector<std::string> label_selector_path;
};

// A CRD's additionalPrinterColumns entry.
struct PrinterColumn {
  std::string name;
  std::string type;  // string, integer, number, boolean, date
  std::string format;
  std::string description;
  std::string json_path;  // ".status.conditions[-1:].type"
  int priority = 0;
};

struct ResourceType {
  std::string group;     // "" for the core group
  std::string version;   // "v1"
  std::string resource;  // "pods"
  std::string singular;  // "pod"
  std::string kind;      // "Pod"
  std::string list_kind; // "PodList"
  bool namespaced = true;
  bool status_subresource = false;
  std::optional<ScaleSubresource> scale;
  bool tracks_generation = false;      // metadata.generation (custom resources, CRDs)
  bool return_deleted_object = false;  // DELETE answers the object, not a Status
  KindRules rules = KindRules::kGeneric;
  std::vector<std::string> short_names;
  std::vector<std::string> categories;
  // Custom resources only.
  std::shared_ptr<const StructuralSchema> schema;  // null: anything goes
  std::vector<PrinterColumn> printer_columns;
  std::string crd_name;  // "trainingjobs.gaptrain.io"

  // "v1", "gaptrain.io/v1alpha1".
  std::string api_version() const { return group.empty() ? version : group + "/" + version; }
  // "pods", "trainingjobs.gaptrain.io": the store key and the name messages use.
  std::string key() const { return group.empty() ? resource : resource + "." + group; }
  // "Pod", "TrainingJob.gaptrain.io": how 422 messages name the kind.
  std::string qualified_kind() const { return group.empty() ? kind : kind + "." + group; }
  // "/api/v1" or "/apis/gaptrain.io/v1alpha1".
  std::string path_prefix() const {
    return group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
  }
};

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_RESOURCE_TYPE_H_
