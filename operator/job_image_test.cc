// Tests how gaptrain-operator chooses the job pods' image without a
// server: --image wins, out of a cluster the built-in default, and which
// container of its own pod it takes. Reading the pod from a real API server
// (the image it gives job pods, and the start refused when the pod cannot
// be read) is operator_process_test's.

#include "operator/job_image.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gaptrain {
namespace {

using nlohmann::json;

OperatorOptions Options(const std::vector<std::string>& args,
                        const std::map<std::string, std::string>& env) {
  OperatorOptions options;
  const Status s = ParseOperatorFlags(args, env, &options);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return options;
}

json PodWith(const json& containers) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", "op"}, {"namespace", "gaptrain-system"}}},
          {"spec", {{"containers", containers}}}};
}

TEST(JobImageTest, AnExplicitImageWinsWithoutReadingThePod) {
  JobImageChoice choice;
  // No client: reading the pod would fail.
  const Status s = ChooseJobImage(
      Options({"--image=registry.example.com/gaptrain:1.2"},
              {{"POD_NAME", "op"}, {"POD_NAMESPACE", "gaptrain-system"}}),
      nullptr, &choice);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(choice.image, "registry.example.com/gaptrain:1.2");
  EXPECT_EQ(choice.source, "--image");
}

TEST(JobImageTest, OutOfAClusterTheBuiltInDefault) {
  JobImageChoice choice;
  const Status s = ChooseJobImage(Options({}, {{"HOSTNAME", "laptop"}}), nullptr, &choice);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(choice.image, "ghcr.io/gaptrain/gaptrain:0.1.0");
  EXPECT_EQ(choice.source, "the built-in default (not in a cluster: $POD_NAME is unset)");
}

TEST(JobImageTest, TheContainerNamedOperatorElseTheOnlyOne) {
  std::string image, container;
  ASSERT_TRUE(OperatorContainerImage(
                  PodWith({{{"name", "istio-proxy"}, {"image", "istio/proxyv2:1.20"}},
                           {{"name", "operator"}, {"image", "registry.example.com/gaptrain:9.9"}}}),
                  &image, &container)
                  .ok());
  EXPECT_EQ(image, "registry.example.com/gaptrain:9.9");
  EXPECT_EQ(container, "operator");

  ASSERT_TRUE(OperatorContainerImage(
                  PodWith({{{"name", "manager"}, {"image", "mirror.example.com/gaptrain:0.1.0"}}}),
                  &image, &container)
                  .ok());
  EXPECT_EQ(image, "mirror.example.com/gaptrain:0.1.0");
  EXPECT_EQ(container, "manager");
}

TEST(JobImageTest, APodWithoutAnOperatorContainerIsAnError) {
  std::string image, container;
  Status s = OperatorContainerImage(
      PodWith({{{"name", "a"}, {"image", "x:1"}}, {{"name", "b"}, {"image", "y:1"}}}), &image,
      &container);
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(s.message(), "none of its 2 containers (a, b) is named \"operator\"");
  s = OperatorContainerImage(PodWith(json::array()), &image, &container);
  EXPECT_EQ(s.message(), "it has no containers");
  s = OperatorContainerImage(PodWith({{{"name", "operator"}}}), &image, &container);
  EXPECT_EQ(s.message(), "its container \"operator\" names no image");
  EXPECT_EQ(image, "");
}

}  // namespace
}  // namespace gaptrain
