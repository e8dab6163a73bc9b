#include "operator/trainingjob/recorded_image.h"

#include <iterator>
#include <optional>
#include <utility>

#include "operator/trainingjob/desired_children.h"
#include "operator/trainingjob/object_fields.h"
#include "operator/trainingjob/pod_state.h"

namespace gaptrain {
namespace trainingjob {
namespace {

using nlohmann::json;

// Which template a pod of `replica_type` (its label) was made from, as a
// rank (the master's first) and the template's key; nullopt for a pod that
// is no replica of the job.
std::optional<std::pair<int, const char*>> TemplateOf(const std::string& replica_type) {
  if (replica_type == kExportReplicaType) {  // the master's template
    return std::make_pair(static_cast<int>(std::size(kReplicaTypes)), "master");
  }
  const std::optional<ReplicaType> type = ReplicaTypeFromLabel(replica_type);
  if (!type) return std::nullopt;
  return std::make_pair(static_cast<int>(*type), TemplateKey(*type));
}

// The image gaptrain's container of `pod` runs; "" when none.
std::string GaptrainImage(const json& pod) {
  for (const json& c : ArrayAt(pod, {"spec", "containers"})) {
    if (StringAt(c, {"name"}) == kContainerName) return StringAt(c, {"image"});
  }
  return "";
}

}  // namespace

std::string RecordedJobImage(const json& job) {
  const std::string asked = StringAt(job, {"metadata", "annotations", kImageAnnotation});
  if (!asked.empty()) return asked;
  return StringAt(job, {"status", "image"});
}

std::string JobPodImage(const json& job, const std::vector<json>& pods,
                        const std::string& operator_image) {
  const std::string recorded = RecordedJobImage(job);
  if (!recorded.empty()) return recorded;
  // A job from before status.image: the image its pods were given.
  const std::string uid = UidOf(job);
  std::optional<std::pair<int, std::string>> best;  // rank, name
  std::string image;
  for (const json& pod : pods) {
    if (!IsControlledBy(pod, uid)) continue;
    const auto from =
        TemplateOf(StringAt(pod, {"metadata", "labels", kReplicaTypeLabel}));
    if (!from) continue;
    const json& template_containers =
        ArrayAt(job, {"spec", from->second, "template", "spec", "containers"});
    if (!template_containers.empty() && !StringAt(template_containers[0], {"image"}).empty()) {
      continue;  // its image is the template's
    }
    const std::string its = GaptrainImage(pod);
    const std::pair<int, std::string> key(from->first, NameOf(pod));
    if (its.empty() || (best && *best <= key)) continue;
    best = key;
    image = its;
  }
  return best ? image : operator_image;
}

}  // namespace trainingjob
}  // namespace gaptrain
