// The ledger annotation: round trip, fallback to the status's counts, bad
// annotations, pruning.

#include "operator/trainingjob/pod_ledger.h"

#include <gtest/gtest.h>

namespace gaptrain {
namespace trainingjob {
namespace {

using nlohmann::json;

json JobWithLedger(const std::string& text) {
  json job = json::parse(R"({"metadata": {"name": "mnist"},
                             "status": {"preemptions": 4, "failures": 2, "restarts": 1}})");
  job["metadata"]["annotations"][kPodLedgerAnnotation] = text;
  return job;
}

TEST(PodLedgerTest, RoundTrip) {
  PodLedger ledger;
  ledger.preemptions = 3;
  ledger.failures = 1;
  ledger.restarts = 2;
  ledger.counted = {"u2", "u1"};
  ledger.released = {"u9"};
  const std::string text = PodLedgerText(ledger);
  EXPECT_EQ(text,
            R"({"counted":["u1","u2"],"failures":1,"preemptions":3,"released":["u9"],"restarts":2})");
  EXPECT_EQ(ReadPodLedger(JobWithLedger(text)), ledger);
}

TEST(PodLedgerTest, WithoutAnAnnotationTheStatusGivesTheCounts) {
  json job = json::parse(R"({"status": {"preemptions": 4, "failures": 2, "restarts": 1}})");
  const PodLedger ledger = ReadPodLedger(job);
  EXPECT_EQ(ledger.preemptions, 4u);
  EXPECT_EQ(ledger.failures, 2u);
  EXPECT_EQ(ledger.restarts, 1u);
  EXPECT_TRUE(ledger.counted.empty());
  EXPECT_EQ(ReadPodLedger(json::parse("{}")), PodLedger());
}

TEST(PodLedgerTest, AnUnreadableAnnotationFallsBackToTheStatus) {
  for (const char* text : {"not json", "[]", R"({"counted": "u1"})", R"({"counted": [1]})",
                           R"({"released": {}})"}) {
    const PodLedger ledger = ReadPodLedger(JobWithLedger(text));
    EXPECT_EQ(ledger.preemptions, 4u) << text;
    EXPECT_TRUE(ledger.counted.empty()) << text;
  }
  // Negative or fractional counts read as 0.
  const PodLedger odd = ReadPodLedger(JobWithLedger(R"({"preemptions": -3, "failures": 1.5})"));
  EXPECT_EQ(odd.preemptions, 0u);
  EXPECT_EQ(odd.failures, 0u);
}

TEST(PodLedgerTest, PruneKeepsOnlyObservedUids) {
  PodLedger ledger;
  ledger.preemptions = 2;
  ledger.counted = {"gone", "here"};
  ledger.released = {"gone2", "here2"};
  PruneLedger({"here", "here2", "unrelated"}, &ledger);
  EXPECT_EQ(ledger.counted, (std::set<std::string>{"here"}));
  EXPECT_EQ(ledger.released, (std::set<std::string>{"here2"}));
  EXPECT_EQ(ledger.preemptions, 2u);
}

}  // namespace
}  // namespace trainingjob
}  // namespace gaptrain
