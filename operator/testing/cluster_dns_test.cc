// Tests the test node's DNS: A records for Services, no data for other
// types of their names, NXDOMAIN for the rest, FORMERR for malformed
// queries, and the server over real UDP.

#include "operator/testing/cluster_dns.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace gaptrain {
namespace kube_testing {
namespace {

constexpr uint16_t kA = 1;
constexpr uint16_t kAAAA = 28;

// A query as resolvers send it: id 0x1234, RD, one question.
std::string Query(const std::string& name, uint16_t type) {
  std::string q = {'\x12', '\x34', '\x01', '\x00', 0, 1, 0, 0, 0, 0, 0, 0};
  size_t start = 0;
  while (start <= name.size()) {
    const size_t dot = name.find('.', start) == std::string::npos ? name.size() : name.find('.', start);
    if (dot > start) {
      q.push_back(static_cast<char>(dot - start));
      q += name.substr(start, dot - start);
    }
    start = dot + 1;
  }
  q.push_back(0);
  q.push_back(static_cast<char>(type >> 8));
  q.push_back(static_cast<char>(type & 0xff));
  q += std::string{0, 1};
  return q;
}

int Rcode(const std::string& r) { return r[3] & 0x0f; }
int Answers(const std::string& r) { return (static_cast<uint8_t>(r[6]) << 8) | static_cast<uint8_t>(r[7]); }

// The addresses of the A records in `response`, dotted.
std::vector<std::string> Addresses(const std::string& response, size_t question_end) {
  std::vector<std::string> out;
  size_t at = question_end;
  for (int i = 0; i < Answers(response); ++i) {
    at += 2 + 2 + 2 + 4;  // name pointer, type, class, ttl
    const size_t length = (static_cast<uint8_t>(response[at]) << 8) | static_cast<uint8_t>(response[at + 1]);
    at += 2;
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, response.data() + at, text, sizeof text);
    out.push_back(text);
    at += length;
  }
  return out;
}

const DnsRecords kRecords = {
    {"job-master.ml.svc.cluster.local", {"10.200.1.2"}},
    {"job-trainers.ml.svc.cluster.local", {"10.200.1.5", "10.200.1.6"}},
    {"empty.ml.svc.cluster.local", {}}};

TEST(AnswerQueryTest, ServicesHaveARecords) {
  const std::string query = Query("job-trainers.ml.svc.cluster.local", kA);
  std::string r;
  ASSERT_TRUE(AnswerQuery(query, kRecords, &r));
  EXPECT_EQ(r.substr(0, 2), "\x12\x34");
  EXPECT_EQ(static_cast<uint8_t>(r[2]) & 0x80, 0x80) << "a response";
  EXPECT_EQ(static_cast<uint8_t>(r[2]) & 0x04, 0x04) << "authoritative";
  EXPECT_EQ(static_cast<uint8_t>(r[2]) & 0x01, 0x01) << "recursion desired, echoed";
  EXPECT_EQ(Rcode(r), 0);
  EXPECT_EQ(r.substr(12, query.size() - 12), query.substr(12)) << "the question, echoed";
  EXPECT_EQ(Addresses(r, query.size()), (std::vector<std::string>{"10.200.1.5", "10.200.1.6"}));
  // Case does not matter, nor a trailing dot.
  ASSERT_TRUE(AnswerQuery(Query("Job-Master.ML.svc.cluster.local.", kA), kRecords, &r));
  EXPECT_EQ(Answers(r), 1);
}

TEST(AnswerQueryTest, OtherTypesOfAKnownNameHaveNoDataAndUnknownNamesDoNotExist) {
  std::string r;
  ASSERT_TRUE(AnswerQuery(Query("job-master.ml.svc.cluster.local", kAAAA), kRecords, &r));
  EXPECT_EQ(Rcode(r), 0);
  EXPECT_EQ(Answers(r), 0);
  for (const char* name : {"job-master.ml.svc.cluster.local.ml.svc.cluster.local",
                           "empty.ml.svc.cluster.local", "example.com"}) {
    ASSERT_TRUE(AnswerQuery(Query(name, kA), kRecords, &r));
    EXPECT_EQ(Rcode(r), 3) << name;
    EXPECT_EQ(Answers(r), 0) << name;
  }
}

TEST(AnswerQueryTest, MalformedQueriesGetFormErrOrNothing) {
  std::string r;
  EXPECT_FALSE(AnswerQuery("short", kRecords, &r));
  std::string response = Query("x", kA);
  response[2] = static_cast<char>(0x81);
  EXPECT_FALSE(AnswerQuery(response, kRecords, &r)) << "a response is not answered";
  std::string cut = Query("job-master.ml.svc.cluster.local", kA);
  cut.resize(cut.size() - 6);
  ASSERT_TRUE(AnswerQuery(cut, kRecords, &r));
  EXPECT_EQ(Rcode(r), 1);
  std::string two = Query("x", kA);
  two[5] = 2;  // two questions
  ASSERT_TRUE(AnswerQuery(two, kRecords, &r));
  EXPECT_EQ(Rcode(r), 1);
}

TEST(ClusterDnsTest, AnswersOverUdpAndFollowsSetRecords) {
  std::unique_ptr<ClusterDns> dns;
  const Status s = ClusterDns::Start("127.0.0.1", 0, &dns);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in server{};
  server.sin_family = AF_INET;
  server.sin_port = htons(dns->port());
  inet_pton(AF_INET, "127.0.0.1", &server.sin_addr);
  auto ask = [&](const std::string& query) {
    ::sendto(fd, query.data(), query.size(), 0, reinterpret_cast<sockaddr*>(&server),
             sizeof(server));
    pollfd wait{fd, POLLIN, 0};
    if (::poll(&wait, 1, 5000) != 1) return std::string();
    char buffer[1500];
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : std::string();
  };
  const std::string query = Query("job-master.ml.svc.cluster.local", kA);
  EXPECT_EQ(Rcode(ask(query)), 3) << "no records yet";
  dns->SetRecords(kRecords);
  const std::string r = ask(query);
  ASSERT_FALSE(r.empty());
  EXPECT_EQ(Addresses(r, query.size()), std::vector<std::string>{"10.200.1.2"});
  ::close(fd);
  dns->Stop();
}

}  // namespace
}  // namespace kube_testing
}  // namespace gaptrain
