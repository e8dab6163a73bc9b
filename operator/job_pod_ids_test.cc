// Tests the explicit --pod-ids choices, which read nothing. auto, which
// asks a real API server whether it serves security.openshift.io, is
// operator_process_test's (with and without that group).

#include "operator/job_pod_ids.h"

#include <gtest/gtest.h>

namespace gaptrain {
namespace {

TEST(JobPodIdsTest, ImageAndClusterNeedNoClient) {
  JobPodIdsChoice choice;
  Status s = ChooseJobPodIds("image", nullptr, &choice);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(choice.fixed);
  EXPECT_EQ(choice.source, "--pod-ids=image");

  s = ChooseJobPodIds("cluster", nullptr, &choice);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_FALSE(choice.fixed);
  EXPECT_EQ(choice.source, "--pod-ids=cluster");
}

TEST(JobPodIdsTest, AnUnknownModeIsRefusedNamingTheFlag) {
  JobPodIdsChoice choice;
  const Status s = ChooseJobPodIds("openshift", nullptr, &choice);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "--pod-ids: must be auto, image or cluster, got 'openshift'");
}

}  // namespace
}  // namespace gaptrain
