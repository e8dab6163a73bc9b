#include "operator/testing/cluster_dns.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>

#include "services/base/os_error.h"

namespace gaptrain {
namespace kube_testing {
namespace {

constexpr size_t kHeaderSize = 12;
constexpr uint16_t kTypeA = 1;
constexpr uint16_t kClassIn = 1;
constexpr uint8_t kFormErr = 1;
constexpr uint8_t kNxDomain = 3;
// CoreDNS's kubernetes plugin answers with a TTL of 5 s.
constexpr uint32_t kTtlSeconds = 5;

uint16_t Read16(const std::string& bytes, size_t at) {
  return static_cast<uint16_t>((static_cast<uint8_t>(bytes[at]) << 8) |
                               static_cast<uint8_t>(bytes[at + 1]));
}

void Append16(std::string* out, uint16_t value) {
  out->push_back(static_cast<char>(value >> 8));
  out->push_back(static_cast<char>(value & 0xff));
}

void Append32(std::string* out, uint32_t value) {
  Append16(out, static_cast<uint16_t>(value >> 16));
  Append16(out, static_cast<uint16_t>(value & 0xffff));
}

// The question's name in lower case, dot-separated; *end is the offset
// after it. False when it is malformed (questions carry no compression).
bool ReadName(const std::string& message, size_t at, std::string* name, size_t* end) {
  name->clear();
  while (at < message.size()) {
    const uint8_t length = static_cast<uint8_t>(message[at++]);
    if (length == 0) {
      *end = at;
      return true;
    }
    if (length > 63 || at + length > message.size()) return false;
    if (!name->empty()) name->push_back('.');
    for (size_t i = 0; i < length; ++i) {
      name->push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(message[at + i]))));
    }
    at += length;
    if (name->size() > 253) return false;
  }
  return false;
}

}  // namespace

bool AnswerQuery(const std::string& query, const DnsRecords& records, std::string* response) {
  if (query.size() < kHeaderSize) return false;
  const uint16_t flags = Read16(query, 2);
  if (flags & 0x8000) return false;  // a response, not a query
  const uint16_t recursion_desired = flags & 0x0100;
  const uint16_t opcode = flags & 0x7800;
  // Header: the query's id, QR, its opcode and RD, AA and RA set.
  auto header = [&](uint8_t rcode, uint16_t questions, uint16_t answers) {
    response->assign(query, 0, 2);
    Append16(response, static_cast<uint16_t>(0x8000 | opcode | 0x0400 | recursion_desired |
                                             0x0080 | rcode));
    Append16(response, questions);
    Append16(response, answers);
    Append16(response, 0);
    Append16(response, 0);
  };
  std::string name;
  size_t end = 0;
  if (Read16(query, 4) != 1 || opcode != 0 || !ReadName(query, kHeaderSize, &name, &end) ||
      end + 4 > query.size()) {
    header(kFormErr, 0, 0);
    return true;
  }
  const uint16_t type = Read16(query, end);
  const uint16_t klass = Read16(query, end + 2);
  const std::string question = query.substr(kHeaderSize, end + 4 - kHeaderSize);
  auto found = records.find(name);
  if (found == records.end() || found->second.empty()) {
    // CoreDNS: a headless Service without endpoints does not exist either.
    header(kNxDomain, 1, 0);
    response->append(question);
    return true;
  }
  std::vector<in_addr> addresses;
  if (type == kTypeA && klass == kClassIn) {
    for (const std::string& text : found->second) {
      in_addr address{};
      if (inet_pton(AF_INET, text.c_str(), &address) == 1) addresses.push_back(address);
    }
  }
  header(0, 1, static_cast<uint16_t>(addresses.size()));
  response->append(question);
  for (const in_addr& address : addresses) {
    Append16(response, 0xc000 | kHeaderSize);  // the question's name
    Append16(response, kTypeA);
    Append16(response, kClassIn);
    Append32(response, kTtlSeconds);
    Append16(response, 4);
    response->append(reinterpret_cast<const char*>(&address), 4);
  }
  return true;
}

Status ClusterDns::Start(const std::string& address, uint16_t port,
                         std::unique_ptr<ClusterDns>* dns) {
  std::unique_ptr<ClusterDns> made(new ClusterDns());
  made->fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (made->fd_ < 0) return OsError("cluster DNS", "socket", errno);
  sockaddr_in bind_address{};
  bind_address.sin_family = AF_INET;
  bind_address.sin_port = htons(port);
  if (inet_pton(AF_INET, address.c_str(), &bind_address.sin_addr) != 1) {
    return Status::InvalidArgument("cluster DNS: '" + address + "' is not an IPv4 address");
  }
  if (::bind(made->fd_, reinterpret_cast<sockaddr*>(&bind_address), sizeof(bind_address)) != 0) {
    return OsError("cluster DNS on " + address + ":" + std::to_string(port), "bind", errno);
  }
  socklen_t length = sizeof(bind_address);
  ::getsockname(made->fd_, reinterpret_cast<sockaddr*>(&bind_address), &length);
  made->port_ = ntohs(bind_address.sin_port);
  made->thread_ = std::thread([d = made.get()] { d->Serve(); });
  *dns = std::move(made);
  return Status::OK();
}

ClusterDns::~ClusterDns() { Stop(); }

void ClusterDns::Stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void ClusterDns::SetRecords(DnsRecords records) {
  std::lock_guard<std::mutex> lock(mu_);
  records_ = std::move(records);
}

void ClusterDns::Serve() {
  char buffer[1500];
  while (!stopping_) {
    // Polled with a timeout so that Stop() is noticed within 100 ms.
    pollfd wait{fd_, POLLIN, 0};
    if (::poll(&wait, 1, 100) <= 0) continue;
    sockaddr_in from{};
    socklen_t from_length = sizeof(from);
    const ssize_t n = ::recvfrom(fd_, buffer, sizeof(buffer), 0,
                                 reinterpret_cast<sockaddr*>(&from), &from_length);
    if (n <= 0) continue;
    std::string response;
    bool answer;
    {
      std::lock_guard<std::mutex> lock(mu_);
      answer = AnswerQuery(std::string(buffer, static_cast<size_t>(n)), records_, &response);
    }
    if (!answer) continue;
    ::sendto(fd_, response.data(), response.size(), 0, reinterpret_cast<sockaddr*>(&from),
             from_length);
  }
}

}  // namespace kube_testing
}  // namespace gaptrain
