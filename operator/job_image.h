// JobImage: the image job pods get when their template names none, chosen
// once when gaptrain-operator starts, so that a Deployment names the image
// once (its container's `image`, which `kustomize edit set image` and the
// chart's image value set):
//   1. --image, when given;
//   2. else, in a cluster ($POD_NAME set by the downward API), the image of
//      the operator's own container: pod $POD_NAMESPACE/$POD_NAME (the
//      client's default namespace when $POD_NAMESPACE is unset), its
//      container named "operator", else its only container;
//   3. else (out of a cluster: no $POD_NAME) the built-in default,
//      ghcr.io/gaptrain/gaptrain:<version>, the tag scripts/build-image.sh
//      gives.
//
// What callers may rely on:
//   - In a cluster, a pod that cannot be read (403: the ClusterRole lacks
//     `get` on pods; 404) or names no operator container is an error
//     naming the cause and --image as the way out; the operator then does
//     not start. Falling back to the built-in default there would run every
//     job on an image nobody chose (not the mirror, fork or release the
//     operator itself runs), silently.
//   - Errors the API server may not repeat (429, 5xx, timeouts) are
//     retried for about 10 seconds before they count.
//   - JobImageChoice::source says where the image came from, for the log.

#ifndef GAPTRAIN_OPERATOR_JOB_IMAGE_H_
#define GAPTRAIN_OPERATOR_JOB_IMAGE_H_

#include <nlohmann/json.hpp>
#include <string>

#include "operator/kube/client.h"
#include "operator/operator_options.h"
#include "services/base/status.h"

namespace gaptrain {

// The container the operator runs in, in its Deployment.
inline constexpr char kOperatorContainerName[] = "operator";

struct JobImageChoice {
  std::string image;
  // "--image", "container \"operator\" of pod gaptrain-system/gaptrain-operator-7c9d-x",
  // or "the built-in default (not in a cluster: $POD_NAME is unset)".
  std::string source;
};

// The image of the operator's container in `pod` (a Pod as the API server
// returns it): the container named "operator", else the only container.
// *container is its name.
Status OperatorContainerImage(const nlohmann::json& pod, std::string* image,
                              std::string* container);

// Chooses as above. `client` reads the pod; it may be null when no pod is
// to be read (--image given, or no $POD_NAME).
Status ChooseJobImage(const OperatorOptions& options, kube::Client* client, JobImageChoice* out);

}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_JOB_IMAGE_H_
