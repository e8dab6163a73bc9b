// JobPodIds: whether job pods name their user and group ids, chosen once
// when gaptrain-operator starts (--pod-ids):
//   - image: runAsUser, runAsGroup and fsGroup 65532, the image's user, so
//     that a fresh volume is writable and runAsNonRoot can be checked;
//   - cluster: none of the three; the cluster assigns them. OpenShift's
//     restricted-v2 SCC refuses pods whose ids lie outside the
//     namespace's range and assigns ids (fsGroup included) to pods that
//     name none;
//   - auto (the default): cluster where the API server serves the group
//     security.openshift.io (OpenShift's SCCs), else image. Discovery is
//     open to every authenticated user (system:discovery), so this needs
//     no permission of its own.
//
// What callers may rely on: image and cluster read nothing; auto asks the
// API once, waiting out a busy server for about 10 seconds
// (kube::RetryWhileBusy), and any other error is returned, naming
// --pod-ids as the way out; JobPodIdsChoice::source says why, for the log.

#ifndef GAPTRAIN_OPERATOR_JOB_POD_IDS_H_
#define GAPTRAIN_OPERATOR_JOB_POD_IDS_H_

#include <string>

#include "operator/kube/client.h"
#include "services/base/status.h"

namespace gaptrain {

// The API group whose presence means OpenShift's SCC admission.
inline constexpr char kOpenShiftSecurityGroup[] = "security.openshift.io";

struct JobPodIdsChoice {
  bool fixed = true;   // OperatorConfig::fixed_pod_ids
  std::string source;  // "--pod-ids=image", "the API serves security.openshift.io (OpenShift)", ...
};

// `mode` is --pod-ids ("auto", "image" or "cluster"); `client` is only
// used for auto and may be null otherwise.
Status ChooseJobPodIds(const std::string& mode, kube::Client* client, JobPodIdsChoice* out);

}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_JOB_POD_IDS_H_
