// The job's image: the annotation, then status.image, then (a job from
// before status.image) what its own pods run, then the operator's.

#include "operator/trainingjob/recorded_image.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gaptrain {
namespace trainingjob {
namespace {

using nlohmann::json;

constexpr char kOperatorImage[] = "ghcr.io/gaptrain/gaptrain:0.2.0";

json Job() {
  return json::parse(R"j({"apiVersion": "gaptrain.io/v1alpha1", "kind": "TrainingJob",
      "metadata": {"name": "mnist", "namespace": "default", "uid": "job-uid"},
      "spec": {"workers": {"replicas": 2}}})j");
}

// A pod of `job_uid` (a controller reference) with gaptrain's container
// running `image`.
json Pod(const std::string& name, const std::string& replica_type, const std::string& image,
         const std::string& job_uid = "job-uid") {
  json pod = {{"metadata",
               {{"name", name},
                {"labels", {{"gaptrain.io/replica-type", replica_type}}},
                {"ownerReferences",
                 json::array({{{"uid", job_uid}, {"controller", true}, {"name", "mnist"}}})}}},
              {"spec",
               {{"containers",
                 json::array({{{"name", "gaptrain"}, {"image", image}},
                              {{"name", "sidecar"}, {"image", "busybox"}}})}}}};
  return pod;
}

TEST(RecordedImageTest, TheAnnotationWinsOverTheStatus) {
  json job = Job();
  EXPECT_EQ(RecordedJobImage(job), "");
  job["status"]["image"] = "ghcr.io/gaptrain/gaptrain:0.1.0";
  EXPECT_EQ(RecordedJobImage(job), "ghcr.io/gaptrain/gaptrain:0.1.0");
  job["metadata"]["annotations"][kImageAnnotation] = "registry.example.com/gaptrain:next";
  EXPECT_EQ(RecordedJobImage(job), "registry.example.com/gaptrain:next");
  // An empty annotation asks for nothing.
  job["metadata"]["annotations"][kImageAnnotation] = "";
  EXPECT_EQ(RecordedJobImage(job), "ghcr.io/gaptrain/gaptrain:0.1.0");
  // A value of another type reads as absent.
  job["status"]["image"] = 7;
  EXPECT_EQ(RecordedJobImage(job), "");
}

TEST(RecordedImageTest, ANewJobTakesTheOperatorsImage) {
  EXPECT_EQ(JobPodImage(Job(), {}, kOperatorImage), kOperatorImage);
}

TEST(RecordedImageTest, ARecordedImageWinsOverPodsAndTheOperator) {
  json job = Job();
  job["status"]["image"] = "ghcr.io/gaptrain/gaptrain:0.1.0";
  const std::vector<json> pods = {Pod("mnist-master", "master", "other:1")};
  EXPECT_EQ(JobPodImage(job, pods, kOperatorImage), "ghcr.io/gaptrain/gaptrain:0.1.0");
  job["metadata"]["annotations"][kImageAnnotation] = "registry.example.com/gaptrain:next";
  EXPECT_EQ(JobPodImage(job, pods, kOperatorImage), "registry.example.com/gaptrain:next");
}

TEST(RecordedImageTest, AJobFromBeforeStatusImageKeepsWhatItsPodsRun) {
  // Trainer 1 was already replaced from another image: the master's wins,
  // whatever the order the pods are observed in.
  const std::vector<json> pods = {Pod("mnist-trainer-1", "trainer", "gaptrain:0.2.0"),
                                  Pod("mnist-trainer-0", "trainer", "gaptrain:0.1.0"),
                                  Pod("mnist-master", "master", "gaptrain:0.1.0")};
  EXPECT_EQ(JobPodImage(Job(), pods, kOperatorImage), "gaptrain:0.1.0");
  const std::vector<json> reversed(pods.rbegin(), pods.rend());
  EXPECT_EQ(JobPodImage(Job(), reversed, kOperatorImage), "gaptrain:0.1.0");
  // Without the master, the lowest trainer.
  EXPECT_EQ(JobPodImage(Job(), {pods[0], pods[1]}, kOperatorImage), "gaptrain:0.1.0");
  // The export pod was made from the master's template.
  EXPECT_EQ(JobPodImage(Job(), {Pod("mnist-export", "export", "gaptrain:0.0.9")}, kOperatorImage),
            "gaptrain:0.0.9");
}

TEST(RecordedImageTest, PodsThatTellNothingAreSkipped) {
  json job = Job();
  // The master's template names its image: its pod runs that, not the job's.
  job["spec"]["master"]["template"]["spec"]["containers"] =
      json::array({{{"image", "registry.example.com/master:1"}}});
  const std::vector<json> pods = {
      Pod("mnist-master", "master", "registry.example.com/master:1"),
      Pod("mnist-coordinator", "coordinator", "gaptrain:0.1.0", "another-job"),
      Pod("mnist-loader", "", "busybox"),
      Pod("mnist-trainer-0", "trainer", "gaptrain:0.1.0")};
  EXPECT_EQ(JobPodImage(job, pods, kOperatorImage), "gaptrain:0.1.0");
  EXPECT_EQ(JobPodImage(job, {pods[0], pods[1], pods[2]}, kOperatorImage), kOperatorImage);
}

}  // namespace
}  // namespace trainingjob
}  // namespace gaptrain
