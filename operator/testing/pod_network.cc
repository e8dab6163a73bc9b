#include "operator/testing/pod_network.h"

#include <arpa/inet.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "services/base/file_contents.h"
#include "services/base/os_error.h"
#include "services/base/process.h"

namespace gaptrain {
namespace kube_testing {
namespace {

constexpr char kBase36[] = "0123456789abcdefghijklmnopqrstuvwxyz";
// Candidate subnets: 10.200.0.0/24 .. 10.249.255.0/24.
constexpr int kFirstSecondOctet = 200;
constexpr int kSubnetCount = 50 * 256;

std::string Base36(uint64_t n) {
  std::string out;
  do {
    out.insert(out.begin(), kBase36[n % 36]);
    n /= 36;
  } while (n != 0);
  return out;
}

std::atomic<uint64_t> next_instance{0};
std::atomic<uint64_t> next_command{0};

std::string IpBinary() {
  for (const char* path : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return "";
}

// Runs `ip ARGS...`; *output (when given) gets what it printed.
Status RunIp(const std::string& scratch_dir, const std::vector<std::string>& args,
             std::string* output = nullptr) {
  const std::string binary = IpBinary();
  if (binary.empty()) {
    return Status::FailedPrecondition("the ip command (iproute2) is not installed");
  }
  Process::Spec spec;
  spec.binary = binary;
  spec.args = args;
  spec.log_file = scratch_dir + "/ip-" + std::to_string(getpid()) + "-" +
                  std::to_string(next_command++) + ".out";
  std::unique_ptr<Process> process;
  GAPTRAIN_RETURN_IF_ERROR(Process::Start(spec, &process));
  if (!process->WaitExit(std::chrono::seconds(30))) {
    process->Stop(std::chrono::milliseconds(0));
  }
  std::string printed;
  ReadFile(spec.log_file, &printed).ok();  // nothing printed: ""
  unlink(spec.log_file.c_str());
  if (output != nullptr) *output = printed;
  const int status = process->wait_status();
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::OK();
  std::string command = "ip";
  for (const std::string& a : args) command += " " + a;
  std::string message = command + ": " + DescribeWaitStatus(status) + ": " + printed;
  while (!message.empty() && message.back() == '\n') message.pop_back();
  if (printed.find("Operation not permitted") != std::string::npos ||
      printed.find("Permission denied") != std::string::npos) {
    return Status(Status::Code::kPermissionDenied,
                  message + " (the test node needs root, or CAP_NET_ADMIN and CAP_SYS_ADMIN, to "
                            "make bridges and network namespaces)");
  }
  return Status::Unavailable(message);
}

// Runs `lines` as one `ip [-n NS] -batch FILE`.
Status RunIpBatch(const std::string& scratch_dir, const std::string& network_namespace,
                  const std::vector<std::string>& lines, bool force = false) {
  const std::string file = scratch_dir + "/ip-batch-" + std::to_string(getpid()) + "-" +
                           std::to_string(next_command++);
  {
    std::ofstream out(file);
    for (const std::string& line : lines) out << line << "\n";
    if (!out) return OsError(file, "write", errno);
  }
  std::vector<std::string> args;
  if (!network_namespace.empty()) args = {"-n", network_namespace};
  if (force) args.push_back("-force");
  args.push_back("-batch");
  args.push_back(file);
  Status status = RunIp(scratch_dir, args);
  unlink(file.c_str());
  return status;
}

struct Prefix {
  uint32_t address = 0;  // host order
  int length = 0;
};

bool ParsePrefix(const std::string& text, Prefix* prefix) {
  const size_t slash = text.find('/');
  const std::string address = text.substr(0, slash);
  in_addr a;
  if (inet_pton(AF_INET, address.c_str(), &a) != 1) return false;
  prefix->address = ntohl(a.s_addr);
  prefix->length = slash == std::string::npos ? 32 : std::atoi(text.c_str() + slash + 1);
  return prefix->length >= 0 && prefix->length <= 32;
}

bool Overlap(const Prefix& a, const Prefix& b) {
  const int length = std::min(a.length, b.length);
  if (length == 0) return true;
  const uint32_t mask = length == 32 ? ~0u : ~((1u << (32 - length)) - 1);
  return (a.address & mask) == (b.address & mask);
}

// The IPv4 prefixes on the host: interface addresses and route
// destinations (not the default route).
Status HostPrefixes(const std::string& scratch_dir, std::vector<Prefix>* prefixes) {
  std::string addresses, routes;
  GAPTRAIN_RETURN_IF_ERROR(RunIp(scratch_dir, {"-o", "-4", "addr", "show"}, &addresses));
  GAPTRAIN_RETURN_IF_ERROR(RunIp(scratch_dir, {"-4", "route", "show", "table", "all"}, &routes));
  std::istringstream words(addresses + "\n" + routes);
  std::string word;
  while (words >> word) {
    Prefix p;
    if (word.find('.') != std::string::npos && ParsePrefix(word, &p)) prefixes->push_back(p);
  }
  return Status::OK();
}

// The pid in NamePrefix() + base36(pid) + "-...", or 0.
pid_t OwnerPid(const std::string& name) {
  const std::string prefix = PodNetwork::NamePrefix();
  if (name.compare(0, prefix.size(), prefix) != 0) return 0;
  const size_t dash = name.find('-', prefix.size());
  if (dash == std::string::npos || dash == prefix.size()) return 0;
  uint64_t pid = 0;
  for (size_t i = prefix.size(); i < dash; ++i) {
    const char* digit = std::strchr(kBase36, name[i]);
    if (digit == nullptr || name[i] == '\0') return 0;
    pid = pid * 36 + static_cast<uint64_t>(digit - kBase36);
    if (pid > (1u << 22)) return 0;  // beyond pid_max
  }
  return static_cast<pid_t>(pid);
}

bool ProcessGone(pid_t pid) { return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH; }

}  // namespace

Status PodNetwork::RemoveStale(const std::string& scratch_dir) {
  std::string namespaces, links;
  GAPTRAIN_RETURN_IF_ERROR(RunIp(scratch_dir, {"netns", "list"}, &namespaces));
  GAPTRAIN_RETURN_IF_ERROR(RunIp(scratch_dir, {"-o", "link", "show"}, &links));
  std::vector<std::string> commands;
  std::istringstream link_lines(links);
  std::string line;
  while (std::getline(link_lines, line)) {
    // "7: gtkabc-0@if2: <BROADCAST,...> ..."
    std::istringstream fields(line);
    std::string index, name;
    fields >> index >> name;
    name = name.substr(0, name.find_first_of("@:"));
    if (ProcessGone(OwnerPid(name))) commands.push_back("link del " + name);
  }
  std::istringstream namespace_lines(namespaces);
  while (std::getline(namespace_lines, line)) {
    const std::string name = line.substr(0, line.find(' '));
    if (ProcessGone(OwnerPid(name))) commands.push_back("netns del " + name);
  }
  if (commands.empty()) return Status::OK();
  // -force: one that another process removed meanwhile does not stop the rest.
  RunIpBatch(scratch_dir, "", commands, /*force=*/true);
  return Status::OK();
}

Status PodNetwork::Create(const std::string& scratch_dir, std::unique_ptr<PodNetwork>* network) {
  if (IpBinary().empty()) {
    return Status::FailedPrecondition("the ip command (iproute2) is not installed");
  }
  GAPTRAIN_RETURN_IF_ERROR(RemoveStale(scratch_dir));
  const uint64_t instance = next_instance++;
  std::unique_ptr<PodNetwork> made(new PodNetwork(
      scratch_dir, std::string(NamePrefix()) + Base36(static_cast<uint64_t>(getpid())) + "-" +
                       Base36(instance)));
  std::vector<Prefix> taken;
  GAPTRAIN_RETURN_IF_ERROR(HostPrefixes(scratch_dir, &taken));
  const uint64_t start = (static_cast<uint64_t>(getpid()) * 7919 + instance * 104729) % kSubnetCount;
  for (int i = 0; i < kSubnetCount && made->subnet_.empty(); ++i) {
    const uint64_t index = (start + i) % kSubnetCount;
    const std::string base = "10." + std::to_string(kFirstSecondOctet + index / 256) + "." +
                             std::to_string(index % 256) + ".";
    Prefix candidate;
    ParsePrefix(base + "0/24", &candidate);
    bool free = true;
    for (const Prefix& p : taken) free = free && !Overlap(p, candidate);
    if (!free) continue;
    made->subnet_base_ = base;
    made->subnet_ = base + "0/24";
    made->gateway_ip_ = base + "1";
  }
  if (made->subnet_.empty()) {
    return Status(Status::Code::kResourceExhausted, "no free /24 in 10.200.0.0-10.249.255.0");
  }
  const std::string& bridge = made->tag_;
  GAPTRAIN_RETURN_IF_ERROR(RunIp(scratch_dir, {"link", "add", bridge, "type", "bridge"}));
  made->bridge_made_ = true;
  // A bridge without an address of its own takes the lowest MAC of its
  // ports, so it changes as pods come and go, and every pod's ARP entry
  // for the gateway goes stale: their connections through it (to the API
  // server, to other nodes' addresses) stalled for 15 s when a job's pods
  // were deleted, long enough for the operator to lose its Lease. A fixed,
  // locally administered address (02:...) derived from the /24 never
  // changes.
  std::istringstream octets(made->subnet_base_);
  std::string first, second, third;
  std::getline(octets, first, '.');
  std::getline(octets, second, '.');
  std::getline(octets, third, '.');
  char mac[32];
  std::snprintf(mac, sizeof mac, "02:67:74:%02x:%02x:01", std::stoi(second) & 0xff,
                std::stoi(third) & 0xff);
  GAPTRAIN_RETURN_IF_ERROR(RunIpBatch(scratch_dir, "",
                                      {"link set " + bridge + " address " + mac,
                                       "addr add " + made->gateway_ip_ + "/24 dev " + bridge,
                                       "link set " + bridge + " up"}));
  *network = std::move(made);
  return Status::OK();
}

PodNetwork::~PodNetwork() { Destroy(); }

Status PodNetwork::AddPod(PodInterface* pod) {
  int octet = 0;
  for (int i = 1; i <= 253 && octet == 0; ++i) {
    const int candidate = 2 + (last_octet_ - 2 + i) % 253;
    if (octets_in_use_.count(candidate) == 0) octet = candidate;
  }
  if (octet == 0) {
    return Status(Status::Code::kResourceExhausted,
                  "the node's subnet " + subnet_ + " has no address left");
  }
  PodInterface made;
  made.namespace_name = tag_ + "-" + Base36(next_serial_++);
  made.namespace_path = "/run/netns/" + made.namespace_name;
  made.host_link = made.namespace_name;
  made.ip = subnet_base_ + std::to_string(octet);
  made.octet = octet;
  Status status = RunIpBatch(
      scratch_dir_, "",
      {"netns add " + made.namespace_name,
       "link add " + made.host_link + " type veth peer name eth0 netns " + made.namespace_name,
       "link set " + made.host_link + " master " + tag_ + " up"});
  if (status.ok()) {
    status = RunIpBatch(scratch_dir_, made.namespace_name,
                        {"addr add " + made.ip + "/24 dev eth0", "link set eth0 up",
                         "link set lo up", "route add default via " + gateway_ip_});
  }
  if (!status.ok()) {
    RemovePod(made);
    return status;
  }
  pods_[made.namespace_name] = made;
  octets_in_use_.insert(octet);
  last_octet_ = octet;
  *pod = made;
  return Status::OK();
}

Status PodNetwork::AddHostAddress(const std::string& ip) {
  return RunIp(scratch_dir_, {"addr", "add", ip + "/32", "dev", tag_});
}

void PodNetwork::RemovePod(const PodInterface& pod) {
  RunIpBatch(scratch_dir_, "", {"link del " + pod.host_link, "netns del " + pod.namespace_name},
             /*force=*/true);
  pods_.erase(pod.namespace_name);
  octets_in_use_.erase(pod.octet);
}

void PodNetwork::Destroy() {
  std::vector<std::string> commands;
  for (const auto& [name, pod] : pods_) {
    commands.push_back("link del " + pod.host_link);
    commands.push_back("netns del " + pod.namespace_name);
  }
  pods_.clear();
  octets_in_use_.clear();
  if (bridge_made_) commands.push_back("link del " + tag_);
  bridge_made_ = false;
  if (!commands.empty()) RunIpBatch(scratch_dir_, "", commands, /*force=*/true);
}

}  // namespace kube_testing
}  // namespace gaptrain
