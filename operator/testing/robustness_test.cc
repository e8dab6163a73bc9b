// Garbage in, errors out: bodies with fields of random JSON types and
// random query strings, sent with every verb, never get a 500 or take the
// server down. Deterministic (fixed seed).

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <random>
#include <string>
#include <vector>

#include "operator/testing/server_test_base.h"

namespace gaptrain {
namespace kube_testing {
namespace {

using nlohmann::json;

json RandomValue(std::mt19937* rng) {
  switch ((*rng)() % 9) {
    case 0: return nullptr;
    case 1: return static_cast<int64_t>((*rng)() % 7) - 3;
    case 2: return 1e300;
    case 3: return "";
    case 4: return "Some Thing/with=odd,chars";
    case 5: return true;
    case 6: return json::array({1, "a", nullptr});
    case 7: return json::object({{"k", "v"}});
    default: return json::object();
  }
}

// Every path (as JSON pointers) in `j`.
void Paths(const json& j, const json::json_pointer& at, std::vector<json::json_pointer>* out) {
  out->push_back(at);
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) Paths(it.value(), at / it.key(), out);
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) Paths(j[i], at / i, out);
  }
}

json Mutate(json body, std::mt19937* rng) {
  const int mutations = 1 + static_cast<int>((*rng)() % 3);
  for (int m = 0; m < mutations; ++m) {
    std::vector<json::json_pointer> paths;
    Paths(body, json::json_pointer(), &paths);
    const json::json_pointer& p = paths[(*rng)() % paths.size()];
    if (p.empty()) {
      body = (*rng)() % 4 == 0 ? RandomValue(rng) : body;
    } else {
      body[p] = RandomValue(rng);
    }
  }
  return body;
}

// A pod with an owner (the job "t" may or may not exist) and a finalizer.
json OwnedPod() {
  json pod = PodBody("p", {{"a", "b"}}, "node-1");
  pod["metadata"]["ownerReferences"] = json::array(
      {{{"apiVersion", "gaptrain.io/v1alpha1"}, {"kind", "TrainingJob"}, {"name", "t"},
        {"uid", "00000000-0000-4000-8000-000000000001"}, {"controller", true},
        {"blockOwnerDeletion", true}}});
  pod["metadata"]["finalizers"] = {"gaptrain.io/x"};
  return pod;
}

class RobustnessTest : public FakeApiServerTest {};

TEST_F(RobustnessTest, RandomBodiesAndQueriesNeverGetA500) {
  std::mt19937 rng(20261123);
  struct Target {
    std::string collection;
    json body;
  };
  const std::vector<Target> targets = {
      {kJobs, TrainingJobBody("t")},
      {kPods, OwnedPod()},
      {kPods, PodBody("q", {{"a", "b"}}, "node-1")},
      {"/api/v1/namespaces/default/services",
       json::parse(R"({"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"ports":[{"port":80}]}})")},
      {"/api/v1/namespaces/default/secrets",
       json::parse(R"({"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"data":{"k":"dg=="},"stringData":{"x":"y"}})")},
      {"/apis/coordination.k8s.io/v1/namespaces/default/leases",
       json::parse(R"({"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"l"},"spec":{"holderIdentity":"a","leaseDurationSeconds":15}})")},
      {"/apis/events.k8s.io/v1/namespaces/default/events",
       json::parse(R"({"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"generateName":"e-"},"eventTime":"2026-11-23T06:06:00.000000Z","reportingController":"a/b","reportingInstance":"i","action":"A","reason":"R","type":"Normal","regarding":{"kind":"Pod","name":"p","namespace":"default"}})")},
      {"/api/v1/namespaces/default/persistentvolumeclaims",
       json::parse(R"({"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"c"},"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}}}})")},
  };
  const std::vector<std::string> queries = {
      "", "?labelSelector=a%20in%20(", "?fieldSelector=metadata.name", "?limit=-1",
      "?limit=1&continue=eyJ2IjoxfQ==", "?resourceVersion=x", "?gracePeriodSeconds=abc",
      "?propagationPolicy=Foreground", "?fieldManager=" + std::string(200, 'm'), "?force=true",
      "?fieldManager=f&force=yes", "?%zz=%", "?orphanDependents=true&propagationPolicy=Orphan"};
  const std::vector<std::string> content_types = {
      "application/json", "application/merge-patch+json", "application/json-patch+json",
      "application/apply-patch+yaml", "text/plain", ""};
  int served = 0;
  for (int i = 0; i < 800; ++i) {
    const Target& target = targets[rng() % targets.size()];
    // Half the time there is an object to update.
    if (rng() % 2 == 0) client_->Post(target.collection, target.body);
    const std::string name = target.body["metadata"].value("name", "x");
    const std::string item = target.collection + "/" + name;
    const json body = Mutate(target.body, &rng);
    const std::string query = queries[rng() % queries.size()];
    const std::string content_type = content_types[rng() % content_types.size()];
    TestResponse r;
    switch (rng() % 9) {
      case 0: r = client_->Send("POST", target.collection + query, body.dump(), content_type); break;
      case 1: r = client_->Send("PUT", item + query, body.dump(), content_type); break;
      case 2: r = client_->Send("PATCH", item + query, body.dump(), content_type); break;
      case 3: r = client_->Send("PATCH", item + "/status" + query, body.dump(), content_type); break;
      case 4: r = client_->Send("PUT", item + "/scale" + query, body.dump(), content_type); break;
      case 5: r = client_->Send("DELETE", item + query, body.dump(), content_type); break;
      case 6: r = client_->Send("GET", target.collection + query); break;
      case 7: r = client_->Send("DELETE", target.collection + query, "", ""); break;
      default: r = client_->Send("POST", item + "/eviction", body.dump(), content_type); break;
    }
    ASSERT_NE(r.status, 0) << "the server went away";
    EXPECT_LT(r.status, 500) << i << ": " << body.dump() << " " << query << " -> " << r.body;
    if (r.status >= 400) {
      EXPECT_EQ(r.json["kind"], "Status") << r.body;
    }
    ++served;
  }
  EXPECT_EQ(served, 800);
  EXPECT_EQ(client_->Get("/healthz").status, 200);
}

}  // namespace
}  // namespace kube_testing
}  // namespace gaptrain
