#include "operator/testing/cluster_hosts.h"

#include <gtest/gtest.h>

namespace gaptrain {
namespace kube_testing {
namespace {

using nlohmann::json;

json Pod(const std::string& ns, const std::string& name, const json& labels, const std::string& ip,
         const std::string& phase = "Running", bool ready = true) {
  return {{"metadata", {{"name", name}, {"namespace", ns}, {"labels", labels}}},
          {"spec", json::object()},
          {"status",
           {{"phase", phase},
            {"podIP", ip},
            {"conditions", {{{"type", "Ready"}, {"status", ready ? "True" : "False"}}}}}}};
}

json Service(const std::string& ns, const std::string& name, const json& selector,
             bool publish_not_ready) {
  return {{"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec",
           {{"clusterIP", "None"},
            {"selector", selector},
            {"publishNotReadyAddresses", publish_not_ready}}}};
}

std::string ServiceLines(const std::string& hosts) {
  return hosts.substr(hosts.find("# Services\n") + 11);
}

TEST(PodHostsFileTest, MapsServiceNamesToTheirPods) {
  ClusterSnapshot snapshot;
  const json self = Pod("ml", "trainer-0", {{"role", "trainer"}}, "10.200.1.5");
  snapshot.Put("pods", self);
  snapshot.Put("pods", Pod("ml", "master", {{"role", "master"}}, "10.200.1.2"));
  snapshot.Put("pods", Pod("ml", "unready", {{"role", "coordinator"}}, "10.200.1.3", "Running",
                           false));
  snapshot.Put("pods", Pod("ml", "done", {{"role", "master"}}, "10.200.1.9", "Succeeded"));
  snapshot.Put("pods", Pod("other", "web", {{"role", "master"}}, "10.200.1.7"));
  snapshot.Put("services", Service("ml", "job-master", {{"role", "master"}}, true));
  snapshot.Put("services", Service("ml", "job-coordinator", {{"role", "coordinator"}}, true));
  snapshot.Put("services", Service("ml", "strict", {{"role", "coordinator"}}, false));
  snapshot.Put("services", Service("other", "web", {{"role", "master"}}, true));
  snapshot.Put("services", {{"metadata", {{"name", "no-selector"}, {"namespace", "ml"}}},
                            {"spec", json::object()}});

  const std::string hosts = PodHostsFile(self, "10.200.1.5", ServiceRecords(snapshot));
  EXPECT_NE(hosts.find("127.0.0.1\tlocalhost\n"), std::string::npos);
  EXPECT_NE(hosts.find("10.200.1.5\ttrainer-0\n"), std::string::npos);
  EXPECT_EQ(ServiceLines(hosts),
            "10.200.1.3\tjob-coordinator job-coordinator.ml job-coordinator.ml.svc "
            "job-coordinator.ml.svc.cluster.local\n"
            "10.200.1.2\tjob-master job-master.ml job-master.ml.svc "
            "job-master.ml.svc.cluster.local\n"
            "10.200.1.7\tweb.other web.other.svc web.other.svc.cluster.local\n");
  EXPECT_EQ(PodHostsFile(self, "10.200.1.5", ServiceRecords(snapshot)), hosts);  // deterministic
}

TEST(PodHostsFileTest, PodsBeingDeletedOrWithoutAddressAreNotEndpoints) {
  ClusterSnapshot snapshot;
  json leaving = Pod("ml", "a", {{"app", "x"}}, "10.200.1.2");
  leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  snapshot.Put("pods", leaving);
  snapshot.Put("pods", Pod("ml", "b", {{"app", "x"}}, ""));
  snapshot.Put("services", Service("ml", "x", {{"app", "x"}}, true));
  json self = Pod("ml", "me", json::object(), "10.200.1.4");
  self["spec"] = {{"hostname", "host"}, {"subdomain", "sub"}};
  const std::string hosts = PodHostsFile(self, "10.200.1.4", ServiceRecords(snapshot));
  EXPECT_EQ(ServiceLines(hosts), "");
  EXPECT_NE(hosts.find("10.200.1.4\thost host.sub.ml.svc.cluster.local\n"), std::string::npos);
}

}  // namespace
}  // namespace kube_testing
}  // namespace gaptrain
