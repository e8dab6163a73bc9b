// The /etc/hosts a pod on the test node (LocalNode) sees: the node has no
// cluster DNS, so each pod's hosts file carries what CoreDNS would answer
// for the cluster's Services.
//
// What callers may rely on:
//   - The usual localhost lines, then the pod's own address with its
//     hostname (spec.hostname or its name, and the FQDN under
//     spec.subdomain), as the kubelet writes them.
//   - For every Service with a selector (in the order of its fully
//     qualified name), one line per endpoint address:
//     the IP of each pod in the Service's namespace whose labels match the
//     selector, that has a status.podIP, is not finished (Succeeded or
//     Failed) and is not being deleted, and is Ready unless the Service
//     publishes not-ready addresses. Services of the pod's own namespace
//     are named SVC, SVC.NS, SVC.NS.svc and SVC.NS.svc.cluster.local;
//     those of other namespaces by the qualified names only. ClusterIP
//     Services resolve to their pods too (there is no kube-proxy here).
//   - Deterministic: an unchanged cluster yields the same bytes.

#ifndef GAPTRAIN_OPERATOR_TESTING_CLUSTER_HOSTS_H_
#define GAPTRAIN_OPERATOR_TESTING_CLUSTER_HOSTS_H_

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "operator/testing/cluster_snapshot.h"

namespace gaptrain {
namespace kube_testing {

// What the cluster's DNS answers for Services (cluster_dns.h): the fully
// qualified name of every Service with a selector
// ("svc.ns.svc.cluster.local") -> the addresses of its endpoints, in pod
// order (none when no pod is an endpoint).
std::map<std::string, std::vector<std::string>> ServiceRecords(const ClusterSnapshot& snapshot);

// The pod's hosts file, its Services' lines from `service_records`
// (ServiceRecords of the same snapshot, computed once for every pod).
std::string PodHostsFile(const nlohmann::json& pod, const std::string& pod_ip,
                         const std::map<std::string, std::vector<std::string>>& service_records);

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_CLUSTER_HOSTS_H_
