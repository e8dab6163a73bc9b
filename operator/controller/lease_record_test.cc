// Tests reading and writing a Lease's leader-election fields against the
// Lease kube-apiserver returned (../shared/k8s/recorded/lease-create.json).

#include "operator/controller/lease_record.h"

#include <gtest/gtest.h>

#include <chrono>

#include "operator/kube/api_time.h"
#include "operator/testing/kube_test_support.h"

namespace gaptrain {
namespace controller {
namespace {

using std::chrono::system_clock;

system_clock::time_point At(const std::string& text) {
  system_clock::time_point t;
  EXPECT_TRUE(kube::ParseRfc3339(text, &t)) << text;
  return t;
}

TEST(LeaseRecordTest, ReadsTheRecordedLease) {
  kube::Recording created;
  ASSERT_TRUE(kube::LoadRecording("lease-create", &created).ok());
  LeaseRecord record;
  Status s = ParseLeaseRecord(created.response_body, &record);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(record.holder_identity, "op-a");
  EXPECT_EQ(record.lease_duration_seconds, 15);
  EXPECT_EQ(record.lease_transitions, 0);
  ASSERT_TRUE(record.renew_time.has_value());
  EXPECT_EQ(kube::FormatMicroTime(*record.renew_time), "2026-11-23T06:00:00.000000Z");
  ASSERT_TRUE(record.acquire_time.has_value());
}

TEST(LeaseRecordTest, WritesTheRecordedRenewal) {
  kube::Recording renew;
  ASSERT_TRUE(kube::LoadRecording("lease-renew", &renew).ok());
  kube::Recording created;
  ASSERT_TRUE(kube::LoadRecording("lease-create", &created).ok());
  nlohmann::json lease = created.response_body;
  LeaseRecord record;
  ASSERT_TRUE(ParseLeaseRecord(lease, &record).ok());
  record.renew_time = *record.renew_time + std::chrono::seconds(5);
  SetLeaseRecord(record, &lease);
  EXPECT_EQ(lease, renew.request_body);
}

TEST(LeaseRecordTest, AnEmptyLeaseHasNoHolder) {
  LeaseRecord record;
  record.holder_identity = "stale";
  ASSERT_TRUE(ParseLeaseRecord({{"metadata", {{"name", "x"}}}}, &record).ok());
  EXPECT_EQ(record.holder_identity, "");
  EXPECT_FALSE(record.renew_time.has_value());
  ASSERT_TRUE(ParseLeaseRecord({{"spec", {{"holderIdentity", nullptr}}}}, &record).ok());
  EXPECT_EQ(record.holder_identity, "");
}

TEST(LeaseRecordTest, BadFieldsAreNamed) {
  const nlohmann::json meta = {{"name", "gaptrain-operator"}, {"namespace", "default"}};
  LeaseRecord record;
  struct Case {
    nlohmann::json spec;
    std::string field;
  };
  for (const Case& c : std::vector<Case>{
           {{{"holderIdentity", 7}}, "spec.holderIdentity"},
           {{{"leaseDurationSeconds", "15"}}, "spec.leaseDurationSeconds"},
           {{{"leaseTransitions", 1.5}}, "spec.leaseTransitions"},
           {{{"renewTime", "yesterday"}}, "spec.renewTime"},
           {{{"acquireTime", 0}}, "spec.acquireTime"},
           {"text", "spec"},
       }) {
    Status s = ParseLeaseRecord({{"metadata", meta}, {"spec", c.spec}}, &record);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << c.field;
    EXPECT_NE(s.message().find("lease default/gaptrain-operator: " + c.field), std::string::npos)
        << s.ToString();
  }
}

TEST(LeaseRecordTest, ReleasedRecordRoundTrips) {
  LeaseRecord record;
  record.lease_duration_seconds = 1;
  record.lease_transitions = 4;
  record.renew_time = At("2026-11-23T06:01:00Z");
  nlohmann::json lease = {{"metadata", {{"resourceVersion", "9"}}},
                          {"spec", {{"acquireTime", "2026-11-23T06:00:00.000000Z"}}}};
  SetLeaseRecord(record, &lease);
  EXPECT_EQ(lease["metadata"]["resourceVersion"], "9");
  EXPECT_EQ(lease["spec"]["holderIdentity"], "");
  EXPECT_FALSE(lease["spec"].contains("acquireTime"));
  LeaseRecord back;
  ASSERT_TRUE(ParseLeaseRecord(lease, &back).ok());
  EXPECT_EQ(back.lease_transitions, 4);
  EXPECT_EQ(back.renew_time, record.renew_time);
}

}  // namespace
}  // namespace controller
}  // namespace gaptrain
