#include "operator/testing/container_env.h"

#include <gtest/gtest.h>

namespace gaptrain {
namespace kube_testing {
namespace {

using nlohmann::json;

TEST(ExpandVariableReferencesTest, FollowsTheKubelet) {
  const std::map<std::string, std::string> vars = {{"A", "x"}, {"EMPTY", ""}};
  EXPECT_EQ(ExpandVariableReferences("$(A)", vars), "x");
  EXPECT_EQ(ExpandVariableReferences("a$(A)b$(A)", vars), "axbx");
  EXPECT_EQ(ExpandVariableReferences("$(B)", vars), "$(B)");  // undefined: as written
  EXPECT_EQ(ExpandVariableReferences("$(EMPTY)!", vars), "!");
  EXPECT_EQ(ExpandVariableReferences("$$(A)", vars), "$(A)");  // escaped
  EXPECT_EQ(ExpandVariableReferences("$$$(A)", vars), "$x");
  EXPECT_EQ(ExpandVariableReferences("$A ${A} $", vars), "$A ${A} $");
  EXPECT_EQ(ExpandVariableReferences("$(A", vars), "$(A");  // unterminated
  EXPECT_EQ(ExpandVariableReferences("", vars), "");
}

json PodWith(const json& container) {
  return {{"metadata",
           {{"name", "p"},
            {"namespace", "ns"},
            {"uid", "u-1"},
            {"labels", {{"app", "web"}}},
            {"annotations", {{"note", "hi"}}}}},
          {"spec", {{"nodeName", "n1"}, {"serviceAccountName", "sa"}, {"containers", {container}}}},
          {"status", {{"podIP", "10.1.2.3"}, {"hostIP", "10.1.2.1"}}}};
}

ClusterSnapshot Objects() {
  ClusterSnapshot snapshot;
  snapshot.Put("secrets", {{"metadata", {{"name", "s"}, {"namespace", "ns"}}},
                           {"data", {{"k", "dmFsdWU="}, {"bad key", "eA=="}}}});  // "value", "x"
  snapshot.Put("configmaps", {{"metadata", {{"name", "c"}, {"namespace", "ns"}}},
                              {"data", {{"LEVEL", "debug"}, {"MODE", "fast"}}}});
  return snapshot;
}

TEST(ResolveContainerEnvTest, ResolvesValuesReferencesAndSources) {
  const json container = {
      {"envFrom",
       {{{"configMapRef", {{"name", "c"}}}, {"prefix", "CFG_"}}, {{"secretRef", {{"name", "s"}}}}}},
      {"env",
       {{{"name", "A"}, {"value", "1"}},
        {{"name", "B"}, {"value", "$(A)-$(CFG_LEVEL)-$(C)"}},  // C is defined later
        {{"name", "C"}, {"value", "3"}},
        {{"name", "k"}, {"value", "override"}},
        {{"name", "NAME"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}},
        {{"name", "NS"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.namespace"}}}}}},
        {{"name", "UID"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.uid"}}}}}},
        {{"name", "APP"},
         {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.labels['app']"}}}}}},
        {{"name", "NOTE"},
         {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.annotations['note']"}}}}}},
        {{"name", "NODE"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "spec.nodeName"}}}}}},
        {{"name", "SA"},
         {"valueFrom", {{"fieldRef", {{"fieldPath", "spec.serviceAccountName"}}}}}},
        {{"name", "IP"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "status.podIP"}}}}}},
        {{"name", "HOST"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "status.hostIP"}}}}}},
        {{"name", "SECRET"},
         {"valueFrom", {{"secretKeyRef", {{"name", "s"}, {"key", "k"}}}}}},
        {{"name", "MODE"},
         {"valueFrom", {{"configMapKeyRef", {{"name", "c"}, {"key", "MODE"}}}}}},
        {{"name", "OPTIONAL"},
         {"valueFrom",
          {{"secretKeyRef", {{"name", "absent"}, {"key", "k"}, {"optional", true}}}}}}}}};
  EnvironmentList env;
  ASSERT_TRUE(ResolveContainerEnv(PodWith(container), container, Objects(), &env).ok());
  const EnvironmentList expected = {
      {"CFG_LEVEL", "debug"}, {"CFG_MODE", "fast"}, {"k", "override"}, {"A", "1"},
      {"B", "1-debug-$(C)"},  {"C", "3"},           {"NAME", "p"},     {"NS", "ns"},
      {"UID", "u-1"},         {"APP", "web"},       {"NOTE", "hi"},    {"NODE", "n1"},
      {"SA", "sa"},           {"IP", "10.1.2.3"},   {"HOST", "10.1.2.1"},
      {"SECRET", "value"},    {"MODE", "fast"}};
  EXPECT_EQ(env, expected);

  std::vector<std::string> argv;
  const json with_command = {{"command", {"run", "$(NAME)"}}, {"args", {"--ip=$(IP)", "$$(IP)"}}};
  ASSERT_TRUE(ResolveCommand(with_command, env, &argv).ok());
  EXPECT_EQ(argv, (std::vector<std::string>{"run", "p", "--ip=10.1.2.3", "$(IP)"}));
}

// The kubelet's downward API for resources: the quantity over the
// divisor, rounded up; an unset limit is the node's allocatable, an unset
// request 0.
TEST(ResolveContainerEnvTest, ResourceFieldRefsAsTheKubeletGivesThem) {
  auto ref = [](const char* name, const char* resource, const char* divisor) {
    json r = {{"resource", resource}};
    if (divisor != nullptr) r["divisor"] = divisor;
    return json{{"name", name}, {"valueFrom", {{"resourceFieldRef", r}}}};
  };
  const json container = {
      {"name", "gaptrain"},
      {"resources", {{"requests", {{"cpu", "500m"}, {"memory", "512Mi"}}}}},
      {"env",
       {ref("CPU_REQUEST_M", "requests.cpu", "1m"), ref("CPU_REQUEST", "requests.cpu", nullptr),
        ref("CPU_LIMIT", "limits.cpu", nullptr), ref("MEM_REQUEST_MI", "requests.memory", "1Mi"),
        ref("MEM_LIMIT", "limits.memory", "1Gi")}}};
  EnvironmentList env;
  const Status s = ResolveContainerEnv(PodWith(container), container, Objects(), &env,
                                       {{"cpu", "4"}, {"memory", "8Gi"}});
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(env, (EnvironmentList{{"CPU_REQUEST_M", "500"},
                                  {"CPU_REQUEST", "1"},
                                  {"CPU_LIMIT", "4"},
                                  {"MEM_REQUEST_MI", "512"},
                                  {"MEM_LIMIT", "8"}}));
  const json bare = {{"name", "c"}, {"env", {ref("CPU", "requests.cpu", "1m")}}};
  ASSERT_TRUE(ResolveContainerEnv(PodWith(bare), bare, Objects(), &env).ok());
  EXPECT_EQ(env, (EnvironmentList{{"CPU", "0"}}));
}

TEST(ParseQuantityTest, SuffixesAndExponents) {
  long double v = 0;
  ASSERT_TRUE(ParseQuantity("500m", &v));
  EXPECT_DOUBLE_EQ(static_cast<double>(v), 0.5);
  ASSERT_TRUE(ParseQuantity("1.5Gi", &v));
  EXPECT_DOUBLE_EQ(static_cast<double>(v), 1.5 * 1024 * 1024 * 1024);
  ASSERT_TRUE(ParseQuantity("2k", &v));
  EXPECT_DOUBLE_EQ(static_cast<double>(v), 2000);
  ASSERT_TRUE(ParseQuantity("1e3", &v));
  EXPECT_DOUBLE_EQ(static_cast<double>(v), 1000);
  ASSERT_TRUE(ParseQuantity("3E", &v));
  EXPECT_DOUBLE_EQ(static_cast<double>(v), 3e18);
  for (const char* bad : {"", "m", "1x", "1.2.3", "Gi", "1 Gi"}) {
    EXPECT_FALSE(ParseQuantity(bad, &v)) << bad;
  }
}

TEST(ResolveContainerEnvTest, MissingObjectsAndBadEntriesAreErrors) {
  auto resolve = [](const json& env_entry) {
    const json container = {{"env", {env_entry}}};
    EnvironmentList env;
    return ResolveContainerEnv(PodWith(container), container, Objects(), &env);
  };
  Status s = resolve({{"name", "X"}, {"valueFrom", {{"secretKeyRef", {{"name", "gone"}, {"key", "k"}}}}}});
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_EQ(s.message(), "secret \"gone\" not found");
  s = resolve({{"name", "X"}, {"valueFrom", {{"secretKeyRef", {{"name", "s"}, {"key", "nope"}}}}}});
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_EQ(s.message(), "couldn't find key nope in Secret ns/s");
  s = resolve({{"name", "X"}, {"valueFrom", {{"configMapKeyRef", {{"name", "gone"}, {"key", "k"}}}}}});
  EXPECT_EQ(s.message(), "configmap \"gone\" not found");
  s = resolve({{"name", "1X"}, {"value", "v"}});
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("env[0].name"), std::string::npos);
  s = resolve({{"name", "X"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "spec.nope"}}}}}});
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("spec.nope"), std::string::npos);
  s = resolve({{"name", "X"}, {"valueFrom", {{"resourceFieldRef", {{"resource", "limits.gpu"}}}}}});
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("limits.gpu"), std::string::npos) << s.message();
  s = resolve({{"name", "X"},
               {"valueFrom",
                {{"resourceFieldRef", {{"resource", "requests.cpu"}, {"divisor", "0"}}}}}});
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("divisor"), std::string::npos) << s.message();

  std::vector<std::string> argv;
  EXPECT_EQ(ResolveCommand({{"args", {"x"}}}, {}, &argv).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(ResolveCommand({{"command", {1}}}, {}, &argv).code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace kube_testing
}  // namespace gaptrain
