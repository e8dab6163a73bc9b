// Merging a user's PodTemplateSpec (spec.workers.template, ...) with the
// pod gaptrain needs: the user's fields are kept (resources, nodeSelector,
// tolerations, affinity, serviceAccountName, volumes, env, sidecars, ...)
// and gaptrain's are merged in, gaptrain winning where both set a field:
//
//   metadata     name, namespace, ownerReferences: gaptrain's; labels: the
//                template's, then the job's metadata.labels, then
//                gaptrain's; annotations: the template's
//   restartPolicy Never; terminationGracePeriodSeconds as given
//   containers   the template's first container becomes gaptrain's (named
//                "gaptrain"): its image (else the default), args,
//                resources, ... are kept; command is gaptrain's, unless
//                parts.keep_command and the container sets one (then its
//                command and args run as given: a user's trainer); env,
//                ports and volumeMounts are the template's with gaptrain's
//                replacing entries of the same name (or port, or mount
//                path); its probes are kept when set, else gaptrain's.
//                Every other container keeps its fields and gets
//                gaptrain's env and shared mounts.
//   volumes      the template's, with gaptrain's replacing same-named ones
//   imagePullSecrets  the template's, then gaptrain's it does not name
//   tolerations  the template's plus gaptrain's (no duplicates)
//   affinity     the template's; gaptrain's required node requirements are
//                ANDed into every required term (or form the only one);
//                its preferred terms are appended
//   securityContext  defaults, the template winning field by field, so
//                that pods meet PodSecurity "restricted" unless the template
//                asks otherwise: the pod's fields gaptrain gives where the
//                template's pod securityContext has none (runAsNonRoot only
//                when nothing in the template runs as uid 0); every
//                container's and init container's, likewise, with
//                capabilities.drop given only when the template's
//                capabilities have no drop list, and allowPrivilegeEscalation
//                not given to a privileged container or one adding
//                SYS_ADMIN (the API refuses false with either)
//
// A template that is not a PodTemplateSpec's shape (a list where an object
// belongs, a container without a name, ...) is INVALID_ARGUMENT naming the
// field under `template_path`.

#ifndef GAPTRAIN_OPERATOR_TRAININGJOB_POD_TEMPLATE_H_
#define GAPTRAIN_OPERATOR_TRAININGJOB_POD_TEMPLATE_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "services/base/status.h"

namespace gaptrain {
namespace trainingjob {

// What gaptrain puts into one replica's pod.
struct GaptrainPodParts {
  nlohmann::json metadata = nlohmann::json::object();  // name, namespace, labels, ownerReferences
  std::string default_image;
  std::vector<std::string> image_pull_secrets;  // Secret names
  nlohmann::json command = nlohmann::json::array();
  nlohmann::json env = nlohmann::json::array();            // for every container
  nlohmann::json own_env = nlohmann::json::array();        // gaptrain's container, after env
  // A first container that sets `command` keeps it (and its args).
  bool keep_command = false;
  nlohmann::json ports = nlohmann::json::array();          // gaptrain's container
  nlohmann::json shared_mounts = nlohmann::json::array();  // every container
  nlohmann::json own_mounts = nlohmann::json::array();     // gaptrain's container only
  nlohmann::json readiness_probe;
  nlohmann::json liveness_probe;
  nlohmann::json volumes = nlohmann::json::array();
  nlohmann::json tolerations = nlohmann::json::array();
  nlohmann::json required_node_requirements = nlohmann::json::array();
  nlohmann::json preferred_node_terms = nlohmann::json::array();
  int64_t termination_grace_period_seconds = 30;
  // Defaults (above): the pod's securityContext, and every container's.
  nlohmann::json pod_security_context = nlohmann::json::object();
  nlohmann::json container_security_context = nlohmann::json::object();
};

// Checks the shape of `pod_template` (null or {} for none) as far as the
// merge reads it.
Status CheckPodTemplate(const nlohmann::json& pod_template, const std::string& template_path);

// terminationGracePeriodSeconds of the template's pod spec, when it sets a
// non-negative integer.
std::optional<int64_t> TemplateGracePeriod(const nlohmann::json& pod_template);

// Whether the first container of `pod_template` sets a non-empty command.
bool TemplateSetsCommand(const nlohmann::json& pod_template);

// The Pod for `parts` merged into `pod_template`. `job_labels` are the
// job's metadata.labels.
Status MergePodTemplate(const nlohmann::json& pod_template, const std::string& template_path,
                        const nlohmann::json& job_labels, const GaptrainPodParts& parts,
                        nlohmann::json* pod);

}  // namespace trainingjob
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TRAININGJOB_POD_TEMPLATE_H_
