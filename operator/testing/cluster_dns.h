// ClusterDns: the test node's cluster DNS, answering as a cluster's CoreDNS
// does for Services, at once: A records for "svc.ns.svc.cluster.local",
// no data (NOERROR, no answer) for other types of those names, and
// NXDOMAIN for every other name (the node has no upstream resolver).
//
// Why a server, though pods' /etc/hosts carries the Services' addresses
// too (cluster_hosts.h): resolvers ask for IPv6 as well, and a hosts file
// without an AAAA line sends that question to the nameserver. With none
// answering, gRPC's c-ares resolver waited 3 s (1 s per search domain)
// before it used the A record it had: a restarted master's new address
// reached its clients 3.6 s after it served instead of at once.
//
// What callers may rely on:
//   - Start() binds UDP port 53 (or `port`) on `address` and answers from a
//     thread of its own until Stop() (or the destructor).
//   - SetRecords() replaces every record at once; lookups are
//     case-insensitive, with or without the trailing dot.
//   - AnswerQuery() is the pure part: one query message in, one response
//     out (RFC 1035 section 4); malformed queries get FORMERR when the
//     header can be read, else no answer. Thread-safe.

#ifndef GAPTRAIN_OPERATOR_TESTING_CLUSTER_DNS_H_
#define GAPTRAIN_OPERATOR_TESTING_CLUSTER_DNS_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "services/base/status.h"

namespace gaptrain {
namespace kube_testing {

// Fully qualified name (lower case, no trailing dot) -> IPv4 addresses.
using DnsRecords = std::map<std::string, std::vector<std::string>>;

// The response to `query`; false when it deserves none (shorter than a
// header, or itself a response).
bool AnswerQuery(const std::string& query, const DnsRecords& records, std::string* response);

class ClusterDns {
 public:
  static Status Start(const std::string& address, uint16_t port,
                      std::unique_ptr<ClusterDns>* dns);
  ~ClusterDns();
  ClusterDns(const ClusterDns&) = delete;
  ClusterDns& operator=(const ClusterDns&) = delete;

  void SetRecords(DnsRecords records);
  void Stop();
  uint16_t port() const { return port_; }

 private:
  ClusterDns() = default;
  void Serve();

  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  std::mutex mu_;
  DnsRecords records_;  // guarded by mu_
};

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_CLUSTER_DNS_H_
