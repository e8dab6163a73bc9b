#include "operator/testing/test_job.h"

#include <gtest/gtest.h>

#include "services/testing/yaml_to_json.h"

namespace gaptrain {
namespace kube_testing {

nlohmann::json TestJob(const std::string& name, const std::string& spec) {
  nlohmann::json job;
  const Status s = YamlToJson(
      "apiVersion: gaptrain.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: '" + name +
          "'}\nspec: " + spec + "\n",
      &job);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return job;
}

}  // namespace kube_testing
}  // namespace gaptrain
