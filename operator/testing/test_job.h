// TestJob: a TrainingJob object for the CRD's API tests, written as the
// YAML a user would write, so each case reads as its manifest does.

#ifndef GAPTRAIN_OPERATOR_TESTING_TEST_JOB_H_
#define GAPTRAIN_OPERATOR_TESTING_TEST_JOB_H_

#include <nlohmann/json.hpp>

#include <string>

namespace gaptrain {
namespace kube_testing {

// A gaptrain.io/v1alpha1 TrainingJob named `name` whose spec is the YAML
// (flow) mapping `spec` ("{data: {path: /data}, training: {epochs: 1}}"),
// converted as kube-apiserver converts YAML. A malformed `spec` fails the
// calling test (and gives null).
nlohmann::json TestJob(const std::string& name, const std::string& spec);

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_TEST_JOB_H_
