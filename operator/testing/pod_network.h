// PodNetwork: the test node's pod network, made as a CNI bridge plugin
// makes one: a Linux bridge (with a fixed MAC address, as the CNI plugin
// gives it, so the gateway's never changes under the pods) holding the
// first address of a private /24 in
// the root network namespace, and per pod a network namespace whose eth0
// is one end of a veth pair attached to the bridge, with its own address
// and a default route through the bridge. Pods reach each other, and the
// root namespace (the operator, the test) reaches them, by pod IP; each pod
// has its own ports and loopback.
//
// What callers may rely on:
//   - Every name it makes (bridge, veths, namespaces) starts with
//     NamePrefix() ("gtk") followed by the owning process's pid, so
//     parallel tests never collide; Create() first removes what processes
//     that no longer exist left behind (RemoveStale()).
//   - The /24 is 10.A.B.0/24 (A in 200..249), chosen from the pid and not
//     overlapping any address or route on the host at the time.
//   - AddPod hands out x.2 .. x.254 in turn, skipping those in use, so a
//     pod that replaces another gets a new address, as on a cluster (an
//     address comes back only after the other 252).
//   - AddHostAddress puts a further address on the bridge (the node plays
//     kube-proxy's part for the `kubernetes` Service: its cluster IP is
//     then a local address, reachable from every pod).
//   - Destroy() (and the destructor) removes every namespace, veth and the
//     bridge it made. Nothing is left behind unless the process dies.
//   - Create() fails with PERMISSION_DENIED when the process may not make
//     bridges and namespaces (it needs root, or CAP_NET_ADMIN and
//     CAP_SYS_ADMIN), with the command's message.
// Runs the `ip` command (iproute2). Not thread-safe.

#ifndef GAPTRAIN_OPERATOR_TESTING_POD_NETWORK_H_
#define GAPTRAIN_OPERATOR_TESTING_POD_NETWORK_H_

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "services/base/status.h"

namespace gaptrain {
namespace kube_testing {

class PodNetwork {
 public:
  struct PodInterface {
    std::string namespace_name;  // for `ip netns`
    std::string namespace_path;  // /run/netns/NAME, for setns
    std::string host_link;       // the veth end on the bridge
    std::string ip;              // "10.213.4.7"
    int octet = 0;               // the address's last byte
  };

  static const char* NamePrefix() { return "gtk"; }

  // `scratch_dir` holds the `ip` commands' batch and output files.
  static Status Create(const std::string& scratch_dir, std::unique_ptr<PodNetwork>* network);
  ~PodNetwork();
  PodNetwork(const PodNetwork&) = delete;
  PodNetwork& operator=(const PodNetwork&) = delete;

  // Creates a namespace and its link for a new pod.
  Status AddPod(PodInterface* pod);
  // Adds `ip`/32 to the bridge (removed with it).
  Status AddHostAddress(const std::string& ip);
  // Removes the pod's link (at once, even while processes still use the
  // namespace) and its namespace.
  void RemovePod(const PodInterface& pod);
  void Destroy();

  // Every name this network made starts with name_prefix().
  const std::string& name_prefix() const { return tag_; }
  const std::string& bridge() const { return tag_; }
  const std::string& gateway_ip() const { return gateway_ip_; }
  const std::string& subnet() const { return subnet_; }  // "10.213.4.0/24"

  // Removes network namespaces and links named NamePrefix()+pid... whose
  // process no longer runs.
  static Status RemoveStale(const std::string& scratch_dir);

 private:
  PodNetwork(std::string scratch_dir, std::string tag)
      : scratch_dir_(std::move(scratch_dir)), tag_(std::move(tag)) {}

  std::string subnet_base_;  // "10.213.4."
  std::string scratch_dir_;
  std::string tag_;
  std::string gateway_ip_;
  std::string subnet_;
  bool bridge_made_ = false;
  uint64_t next_serial_ = 0;
  std::set<int> octets_in_use_;
  int last_octet_ = 1;  // the last address handed out
  std::map<std::string, PodInterface> pods_;  // namespace name -> pod
};

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_POD_NETWORK_H_
