// Tests the Informer against the scripted API server, for what a real
// server does not send or does not show: the cache holding a change before
// the handlers run, objects without a key (skipped and counted), the exact
// selector and namespace of the requests, an every-namespace informer
// meeting an object without a namespace, handler registration and a prompt
// Stop. The cache following creates, updates and deletes, the label index
// and the re-list after a 410 (with tombstones) are tested against the
// real server in api_server_test.

#include "operator/controller/informer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "operator/controller/object_key.h"
#include "operator/testing/kube_test_support.h"
#include "operator/testing/scripted_server.h"

namespace gaptrain {
namespace controller {
namespace {

using kube::ListReply;
using kube::ScriptedReply;
using kube::ScriptedServer;
using kube::WatchReply;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kJobLabel[] = "gaptrain.io/job-name";

nlohmann::json Pod(const std::string& name, const std::string& rv, const std::string& job) {
  nlohmann::json pod = {{"apiVersion", "v1"},
                        {"kind", "Pod"},
                        {"metadata",
                         {{"name", name},
                          {"namespace", "default"},
                          {"resourceVersion", rv},
                          {"labels", {{"gaptrain.io/replica-type", "trainer"}}}}}};
  if (!job.empty()) pod["metadata"]["labels"][kJobLabel] = job;
  return pod;
}

std::string Event(const std::string& type, const nlohmann::json& object) {
  return nlohmann::json({{"type", type}, {"object", object}}).dump();
}

ScriptedReply PodList(const std::vector<nlohmann::json>& pods, const std::string& rv) {
  return ListReply("PodList", "v1", pods, rv);
}

std::string Describe(const nlohmann::json& object) {
  return ObjectName(object) + "@" + ObjectResourceVersion(object);
}

// Records handler calls as lines; waits for a number of them.
class Recorder {
 public:
  EventHandlers Handlers() {
    EventHandlers h;
    h.on_add = [this](const nlohmann::json& o) { Record("add " + Describe(o)); };
    h.on_update = [this](const nlohmann::json& old_object, const nlohmann::json& new_object) {
      Record("update " + Describe(old_object) + "->" + Describe(new_object));
    };
    h.on_delete = [this](const nlohmann::json& o, bool final_state_unknown) {
      Record((final_state_unknown ? "tombstone " : "delete ") + Describe(o));
    };
    h.on_synced = [this] { Record("synced"); };
    return h;
  }

  bool WaitForCalls(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, seconds(10), [&] { return calls_.size() >= n; });
  }

  std::vector<std::string> calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

 private:
  void Record(const std::string& line) {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.push_back(line);
    changed_.notify_all();
  }

  std::mutex mu_;
  std::condition_variable changed_;
  std::vector<std::string> calls_;
};

std::vector<std::string> Names(const std::vector<nlohmann::json>& objects) {
  std::vector<std::string> names;
  for (const nlohmann::json& o : objects) names.push_back(ObjectName(o));
  return names;
}

class InformerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(ScriptedServer::Start({}, &server_).ok());
    kube::ClusterConfig config;
    config.server = server_->url();
    kube::ClientOptions client_options;
    client_options.request_timeout = milliseconds(10000);
    ASSERT_TRUE(kube::Client::New(config, client_options, &client_).ok());
    options_.reflector.backoff.initial = milliseconds(5);
    options_.reflector.backoff.max = milliseconds(20);
    options_.reflector.watch_timeout_seconds = 60;
    options_.index_labels = {kJobLabel};
  }

  void TearDown() override {
    if (informer_ != nullptr) informer_->Stop();
  }

  void StartInformer() {
    informer_ = std::make_unique<Informer>(client_.get(), kube::kPods, "", options_);
    ASSERT_TRUE(informer_->AddEventHandlers(recorder_.Handlers()).ok());
    ASSERT_TRUE(informer_->Start().ok());
  }

  std::unique_ptr<ScriptedServer> server_;
  std::unique_ptr<kube::Client> client_;
  Informer::Options options_;
  Recorder recorder_;
  std::unique_ptr<Informer> informer_;
};

TEST_F(InformerTest, TheCacheHoldsTheChangeBeforeTheHandlerRuns) {
  server_->Push(PodList({}, "1"));
  server_->Push(
      WatchReply({Event("ADDED", Pod("x", "2", "j")), Event("MODIFIED", Pod("x", "3", "j"))},
                 /*end=*/false));
  informer_ = std::make_unique<Informer>(client_.get(), kube::kPods, "default", options_);
  std::mutex mu;
  std::vector<std::string> seen;  // what the cache said inside each handler
  EventHandlers handlers;
  auto look = [&](const nlohmann::json& o) {
    nlohmann::json cached;
    const bool found = informer_->Get("default", ObjectName(o), &cached);
    std::lock_guard<std::mutex> lock(mu);
    seen.push_back(found ? Describe(cached) : "missing");
  };
  handlers.on_add = look;
  handlers.on_update = [&](const nlohmann::json&, const nlohmann::json& o) { look(o); };
  ASSERT_TRUE(informer_->AddEventHandlers(handlers).ok());
  ASSERT_TRUE(informer_->AddEventHandlers(recorder_.Handlers()).ok());
  ASSERT_TRUE(informer_->Start().ok());
  ASSERT_TRUE(recorder_.WaitForCalls(3));
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(seen, (std::vector<std::string>{"x@2", "x@3"}));
}

TEST_F(InformerTest, ObjectsWithoutAKeyAreSkippedAndCounted) {
  nlohmann::json nameless = Pod("", "1", "j");
  nameless["metadata"].erase("name");
  nlohmann::json no_namespace = Pod("lonely", "2", "j");
  no_namespace["metadata"].erase("namespace");
  server_->Push(PodList({nameless, no_namespace}, "5"));
  server_->Push(WatchReply({}, /*end=*/false));
  StartInformer();
  ASSERT_TRUE(informer_->WaitForSync(seconds(10)));
  ASSERT_TRUE(recorder_.WaitForCalls(2));
  EXPECT_EQ(recorder_.calls(), (std::vector<std::string>{"add lonely@2", "synced"}));
  // The namespace the informer watches is filled in.
  nlohmann::json pod;
  ASSERT_TRUE(informer_->Get("default", "lonely", &pod));
  EXPECT_EQ(ObjectNamespace(pod), "default");
  const Informer::Stats stats = informer_->stats();
  EXPECT_EQ(stats.skipped, 1u);
  EXPECT_NE(stats.last_skipped.message().find("metadata.name"), std::string::npos)
      << stats.last_skipped.ToString();
}

TEST_F(InformerTest, SendsTheSelectorAndWatchesTheGivenNamespace) {
  options_.reflector.label_selector = kJobLabel;
  server_->Push(PodList({}, "7"));
  server_->Push(WatchReply({}, /*end=*/false));
  informer_ = std::make_unique<Informer>(client_.get(), kube::kPods, "jobs", options_);
  EXPECT_EQ(informer_->watched_namespace(), "jobs");
  ASSERT_TRUE(informer_->Start().ok());
  ASSERT_TRUE(server_->WaitForRequests(2, seconds(10)));
  for (const kube::ReceivedRequest& r : server_->requests()) {
    EXPECT_EQ(r.path, "/api/v1/namespaces/jobs/pods");
    EXPECT_EQ(r.query.at("labelSelector"), kJobLabel);
  }
}

// An operator installed cluster-wide: one list and one watch across every
// namespace, a cache keyed and indexed by each object's own namespace.
TEST_F(InformerTest, WatchesEveryNamespaceAtOnce) {
  nlohmann::json in_x = Pod("a", "1", "j");
  in_x["metadata"]["namespace"] = "x";
  nlohmann::json in_y = Pod("a", "2", "j");
  in_y["metadata"]["namespace"] = "y";
  nlohmann::json nowhere = Pod("b", "3", "j");
  nowhere["metadata"].erase("namespace");
  server_->Push(PodList({in_x, in_y, nowhere}, "5"));
  nlohmann::json added = Pod("c", "6", "j");
  added["metadata"]["namespace"] = "z";
  server_->Push(WatchReply({Event("ADDED", added)}, /*end=*/false));
  informer_ = std::make_unique<Informer>(client_.get(), kube::kPods, kube::kAllNamespaces,
                                         options_);
  EXPECT_EQ(informer_->watched_namespace(), kube::kAllNamespaces);
  ASSERT_TRUE(informer_->AddEventHandlers(recorder_.Handlers()).ok());
  ASSERT_TRUE(informer_->Start().ok());
  ASSERT_TRUE(recorder_.WaitForCalls(4));
  EXPECT_EQ(informer_->ListKeys(), (std::vector<std::string>{"x/a", "y/a", "z/c"}));
  EXPECT_EQ(Names(informer_->ListByLabel("y", kJobLabel, "j")), std::vector<std::string>{"a"});
  EXPECT_EQ(informer_->ListByLabel("", kJobLabel, "j").size(), 3u);
  // Visit sees what List copies, in key order, per namespace or all.
  std::vector<std::string> visited;
  informer_->Visit("", [&](const nlohmann::json& o) {
    visited.push_back(o["metadata"]["namespace"].get<std::string>() + "/" +
                      o["metadata"]["resourceVersion"].get<std::string>());
  });
  EXPECT_EQ(visited, (std::vector<std::string>{"x/1", "y/2", "z/6"}));
  visited.clear();
  informer_->Visit("y", [&](const nlohmann::json& o) {
    visited.push_back(o["metadata"]["name"].get<std::string>());
  });
  EXPECT_EQ(visited, std::vector<std::string>{"a"});
  EXPECT_EQ(informer_->stats().skipped, 1u);
  EXPECT_NE(informer_->stats().last_skipped.message().find("metadata.namespace"),
            std::string::npos);
  for (const kube::ReceivedRequest& r : server_->requests()) EXPECT_EQ(r.path, "/api/v1/pods");
}

TEST_F(InformerTest, HandlersComeBeforeStartAndStartComesOnce) {
  server_->Push(PodList({}, "1"));
  server_->Push(WatchReply({}, /*end=*/false));
  StartInformer();
  EXPECT_EQ(informer_->AddEventHandlers(EventHandlers()).code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(informer_->Start().code(), Status::Code::kFailedPrecondition);
}

TEST_F(InformerTest, StopIsPromptAndEndsAWaitForSync) {
  ScriptedReply hang;  // the list never answers
  hang.hang = true;
  server_->Push(hang);
  StartInformer();
  ASSERT_TRUE(server_->WaitForRequests(1, seconds(10)));
  EXPECT_FALSE(informer_->HasSynced());
  const auto start = std::chrono::steady_clock::now();
  informer_->Stop();
  EXPECT_FALSE(informer_->WaitForSync(seconds(10)));
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(2));
  EXPECT_TRUE(recorder_.calls().empty());
  informer_->Stop();  // idempotent
}

}  // namespace
}  // namespace controller
}  // namespace gaptrain
