#include "operator/testing/discovery.h"

#include <openssl/sha.h>

#include <algorithm>
#include <set>
#include <vector>

#include "operator/testing/base64.h"

namespace gaptrain {
namespace kube_testing {

using nlohmann::ordered_json;

namespace {

ordered_json GroupVersion(const std::string& group, const std::string& version) {
  ordered_json v;
  v["groupVersion"] = group.empty() ? version : group + "/" + version;
  v["version"] = version;
  return v;
}

ordered_json SubresourceEntry(const ResourceType& t, const std::string& sub,
                              const std::string& group, const std::string& version,
                              const std::string& kind, std::vector<std::string> verbs) {
  ordered_json r;
  r["name"] = t.resource + "/" + sub;
  r["singularName"] = "";
  r["namespaced"] = t.namespaced;
  if (!group.empty() || !version.empty()) {
    r["group"] = group;
    r["version"] = version;
  }
  r["kind"] = kind;
  r["verbs"] = verbs;
  return r;
}

}  // namespace

std::string StorageVersionHash(const std::string& group, const std::string& version,
                               const std::string& kind) {
  const std::string gvk = group + "/" + version + "/" + kind;
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(gvk.data()), gvk.size(), digest);
  return Base64Encode(std::string(reinterpret_cast<const char*>(digest), 8));
}

ordered_json ApiVersionsDocument(const std::string& server_address) {
  ordered_json doc;
  doc["kind"] = "APIVersions";
  doc["versions"] = {"v1"};
  doc["serverAddressByClientCIDRs"] =
      ordered_json::array({{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", server_address}}});
  return doc;
}

ordered_json ApiGroupListDocument(const ResourceRegistry& registry) {
  ordered_json doc;
  doc["kind"] = "APIGroupList";
  doc["apiVersion"] = "v1";
  doc["groups"] = ordered_json::array();
  std::vector<std::string> groups;
  for (const ResourceTypePtr& t : registry.All()) {
    if (!t->group.empty() && std::find(groups.begin(), groups.end(), t->group) == groups.end()) {
      groups.push_back(t->group);
    }
  }
  for (const std::string& g : groups) {
    ordered_json group;
    ApiGroupDocument(registry, g, &group);
    group.erase("kind");
    group.erase("apiVersion");
    doc["groups"].push_back(std::move(group));
  }
  return doc;
}

bool ApiGroupDocument(const ResourceRegistry& registry, const std::string& group,
                      ordered_json* out) {
  std::vector<std::string> versions;
  for (const ResourceTypePtr& t : registry.All()) {
    if (t->group == group &&
        std::find(versions.begin(), versions.end(), t->version) == versions.end()) {
      versions.push_back(t->version);
    }
  }
  if (versions.empty() || group.empty()) return false;
  ordered_json doc;
  doc["kind"] = "APIGroup";
  doc["apiVersion"] = "v1";
  doc["name"] = group;
  doc["versions"] = ordered_json::array();
  for (const std::string& v : versions) doc["versions"].push_back(GroupVersion(group, v));
  doc["preferredVersion"] = GroupVersion(group, versions.front());
  *out = std::move(doc);
  return true;
}

bool ApiResourceListDocument(const ResourceRegistry& registry, const std::string& group,
                             const std::string& version, ordered_json* out) {
  std::vector<ordered_json> resources;
  for (const ResourceTypePtr& tp : registry.All()) {
    const ResourceType& t = *tp;
    if (t.group != group || t.version != version) continue;
    ordered_json r;
    r["name"] = t.resource;
    r["singularName"] = t.singular;
    r["namespaced"] = t.namespaced;
    r["kind"] = t.kind;
    if (t.rules == KindRules::kCustomResource) {
      // The order the recorded CRD discovery lists them in.
      r["verbs"] = {"delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"};
    } else {
      r["verbs"] = {"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"};
    }
    if (!t.short_names.empty()) r["shortNames"] = t.short_names;
    if (!t.categories.empty()) r["categories"] = t.categories;
    r["storageVersionHash"] = StorageVersionHash(t.group, t.version, t.kind);
    resources.push_back(std::move(r));
    if (t.status_subresource) {
      resources.push_back(SubresourceEntry(t, "status", "", "", t.kind, {"get", "patch", "update"}));
    }
    if (t.scale) {
      resources.push_back(
          SubresourceEntry(t, "scale", "autoscaling", "v1", "Scale", {"get", "patch", "update"}));
    }
    if (t.rules == KindRules::kPod) {
      resources.push_back(SubresourceEntry(t, "binding", "", "", "Binding", {"create"}));
      resources.push_back(SubresourceEntry(t, "eviction", "policy", "v1", "Eviction", {"create"}));
    }
  }
  if (resources.empty()) return false;
  if (group.empty()) {
    std::stable_sort(resources.begin(), resources.end(),
                     [](const ordered_json& a, const ordered_json& b) {
                       return a["name"].get<std::string>() < b["name"].get<std::string>();
                     });
  }
  ordered_json doc;
  doc["kind"] = "APIResourceList";
  doc["apiVersion"] = "v1";
  doc["groupVersion"] = group.empty() ? version : group + "/" + version;
  doc["resources"] = resources;
  *out = std::move(doc);
  return true;
}

ordered_json VersionDocument() {
  ordered_json doc;
  doc["major"] = "1";
  doc["minor"] = "26";
  doc["gitVersion"] = "v1.26.0-gaptrain-fake";
  doc["gitCommit"] = "";
  doc["gitTreeState"] = "clean";
  doc["buildDate"] = "";
  doc["goVersion"] = "";
  doc["compiler"] = "gc";
  doc["platform"] = "linux/amd64";
  return doc;
}

}  // namespace kube_testing
}  // namespace gaptrain
