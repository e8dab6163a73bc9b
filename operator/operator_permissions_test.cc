// Tests the operator's declared permissions: within what the client can
// do, grouped into ClusterRole rules as docs/operator.md shows them (the
// documented ClusterRole must grant exactly these). That a real run uses
// nothing else is checked by operator_process_test and operator_e2e_test
// against the fake API server's request log.

#include "operator/operator_permissions.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "services/base/file_contents.h"
#include "services/testing/yaml_to_json.h"

namespace gaptrain {
namespace {

using kube::RbacPermission;

TEST(OperatorPermissionsTest, ASortedSubsetOfWhatTheClientCanDo) {
  const std::vector<RbacPermission> mine = OperatorPermissions();
  const std::vector<RbacPermission> client = kube::ClientPermissions();
  const std::vector<RbacPermission> admission = OperatorAdmissionPermissions();
  EXPECT_TRUE(std::is_sorted(mine.begin(), mine.end()));
  EXPECT_EQ(std::adjacent_find(mine.begin(), mine.end()), mine.end());
  for (const RbacPermission& p : mine) {
    const bool called = std::binary_search(client.begin(), client.end(), p);
    const bool admitted = std::find(admission.begin(), admission.end(), p) != admission.end();
    EXPECT_NE(called, admitted) << p.group << " " << p.resource << " " << p.verb
                                << ": a call the client makes, or else one admission checks";
  }
  // The children's blockOwnerDeletion under OwnerReferencesPermissionEnforcement.
  EXPECT_EQ(admission,
            (std::vector<RbacPermission>{{"gaptrain.io", "trainingjobs/finalizers", "update"}}));
  for (const RbacPermission& p : admission) {
    EXPECT_TRUE(std::binary_search(mine.begin(), mine.end(), p)) << p.resource;
  }
  // Its own pod, read once at start-up for the job pods' image.
  EXPECT_TRUE(std::binary_search(mine.begin(), mine.end(), RbacPermission{"", "pods", "get"}));
  // Secrets: create, and nothing else (no read of any Secret in the
  // cluster: RBAC cannot narrow a list or watch to gaptrain's).
  for (const RbacPermission& p : mine) {
    if (p.resource == "secrets") EXPECT_EQ(p.verb, "create");
  }
  EXPECT_TRUE(
      std::binary_search(mine.begin(), mine.end(), RbacPermission{"", "secrets", "create"}));
  // The few things it must not be able to do.
  for (const RbacPermission& forbidden :
       {RbacPermission{"", "secrets", "get"}, RbacPermission{"", "secrets", "list"},
        RbacPermission{"", "secrets", "watch"}, RbacPermission{"", "secrets", "update"},
        RbacPermission{"", "secrets", "delete"}, RbacPermission{"", "pods", "update"},
        RbacPermission{"networking.k8s.io", "networkpolicies", "delete"},
        RbacPermission{"coordination.k8s.io", "leases", "delete"},
        RbacPermission{"gaptrain.io", "trainingjobs", "create"}}) {
    EXPECT_FALSE(std::binary_search(mine.begin(), mine.end(), forbidden))
        << forbidden.resource << " " << forbidden.verb;
  }
}

TEST(OperatorPermissionsTest, RulesGroupResourcesWithTheSameVerbs) {
  const nlohmann::json rules = PolicyRules({{"", "services", "patch"},
                                            {"", "configmaps", "patch"},
                                            {"", "pods", "delete"},
                                            {"", "pods", "patch"},
                                            {"events.k8s.io", "events", "create"}});
  EXPECT_EQ(rules, nlohmann::json::parse(R"([
      {"apiGroups": [""], "resources": ["pods"], "verbs": ["delete", "patch"]},
      {"apiGroups": [""], "resources": ["configmaps", "services"], "verbs": ["patch"]},
      {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create"]}])"));
  // Every permission is in exactly one rule.
  size_t count = 0;
  for (const nlohmann::json& rule : OperatorPolicyRules()) {
    count += rule["resources"].size() * rule["verbs"].size();
  }
  EXPECT_EQ(count, OperatorPermissions().size());
}

TEST(OperatorPermissionsTest, RequestLogEntriesMapToPermissions) {
  EXPECT_EQ(RequestPermission("gaptrain.io", "trainingjobs", "status", "patch"),
            (RbacPermission{"gaptrain.io", "trainingjobs/status", "patch"}));
  EXPECT_EQ(RequestPermission("", "pods", "", "list"), (RbacPermission{"", "pods", "list"}));
}

// docs/operator.md shows the ClusterRole a Deployment needs; it must grant
// what the operator uses, no more and no less.
TEST(OperatorPermissionsTest, TheDocumentedClusterRoleMatches) {
  std::string doc;
  const Status read = ReadFile("docs/operator.md", &doc);
  ASSERT_TRUE(read.ok()) << read.ToString() << " (docs/operator.md is not in the runfiles)";
  // The yaml block holding the ClusterRole, one document of several.
  const size_t kind = doc.find("\nkind: ClusterRole\n");
  ASSERT_NE(kind, std::string::npos) << "no ClusterRole in docs/operator.md";
  const size_t begin = doc.rfind("```yaml\n", kind);
  const size_t end = doc.find("```", kind);
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  const std::string block = doc.substr(begin + 8, end - begin - 8);
  nlohmann::json role;
  for (size_t from = 0; from < block.size();) {
    size_t separator = block.find("---\n", from);
    if (separator == std::string::npos) separator = block.size();
    nlohmann::json document;
    const Status s = kube_testing::YamlToJson(block.substr(from, separator - from), &document);
    ASSERT_TRUE(s.ok()) << s.ToString();
    if (document.is_object() && document.value("kind", "") == "ClusterRole") role = document;
    from = separator + 4;
  }
  ASSERT_TRUE(role.is_object()) << block;
  EXPECT_EQ(role["rules"], OperatorPolicyRules()) << "docs/operator.md should show:\n"
                                                  << OperatorPolicyRules().dump(2);
}

}  // namespace
}  // namespace gaptrain
