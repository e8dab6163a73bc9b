// Reading kubeconfig files (what kubectl reads: clusters, users, contexts,
// current-context) into a ClusterConfig.
//
// Supported: a cluster's server, certificate-authority(-data),
// insecure-skip-tls-verify and tls-server-name; a user's token, tokenFile,
// client-certificate(-data) and client-key(-data); a context's namespace.
// The *-data forms are base64 and win over the file forms, as in kubectl.
// Relative file paths are relative to the directory of the kubeconfig file
// that holds the entry. Exec plugins, auth providers, basic auth,
// impersonation and proxy-url are refused with an error naming the entry
// and field, e.g. "kubeconfig /x/config: users[0].user.exec: exec credential
// plugins are not supported ...". Unknown fields are ignored, as kubectl
// does.

#ifndef GAPTRAIN_OPERATOR_KUBE_KUBECONFIG_H_
#define GAPTRAIN_OPERATOR_KUBE_KUBECONFIG_H_

#include <string>
#include <vector>

#include "operator/kube/cluster_config.h"
#include "services/base/status.h"

namespace gaptrain {
namespace kube {

// Loads `files` merged as kubectl merges $KUBECONFIG: for each cluster,
// user and context name, and for current-context, the first file that sets
// it wins. Uses `context`, or current-context when `context` is "".
Status LoadKubeconfig(const std::vector<std::string>& files, const std::string& context,
                      ClusterConfig* out);

// $KUBECONFIG's list: split on ':', empty entries and repeats dropped.
std::vector<std::string> SplitKubeconfigList(const std::string& list);

// Strict standard base64 (with padding; line breaks allowed). False on
// anything else.
bool DecodeBase64(const std::string& text, std::string* out);

}  // namespace kube
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_KUBE_KUBECONFIG_H_
