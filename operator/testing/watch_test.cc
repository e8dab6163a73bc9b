// Watch semantics over HTTP: starting points, history, selectors, bookmarks,
// timeouts, and what the fault hooks do to open watches.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

#include "operator/testing/server_test_base.h"

namespace gaptrain {
namespace kube_testing {
namespace {

using nlohmann::json;

class WatchTest : public FakeApiServerTest {
 protected:
  void Configure(FakeApiServer::Options* options) override {
    options->bookmark_interval = std::chrono::milliseconds(100);
    options->watch_history_size = 8;
  }
  std::string Now() const { return std::to_string(server_->resource_version()); }
};

TEST_F(WatchTest, ResourceVersionZeroStartsWithTheCurrentState) {
  client_->Post(kPods, PodBody("a"));
  client_->Post(kPods, PodBody("b"));
  std::unique_ptr<WatchReader> watch = OpenWatch(std::string(kPods) + "?watch=1&resourceVersion=0");
  ASSERT_EQ(watch->status(), 200);
  EXPECT_EQ(watch->Header("Content-Type"), "application/json");
  EXPECT_EQ(watch->Header("Transfer-Encoding"), "chunked");
  json event;
  ASSERT_TRUE(watch->Next(kWait, &event).ok());
  EXPECT_EQ(event["type"], "ADDED");
  EXPECT_EQ(event["object"]["metadata"]["name"], "a");
  ASSERT_TRUE(watch->Next(kWait, &event).ok());
  EXPECT_EQ(event["object"]["metadata"]["name"], "b");
  client_->Post(kPods, PodBody("c"));
  ASSERT_TRUE(watch->Next(kWait, &event).ok());
  EXPECT_EQ(event["type"], "ADDED");
  EXPECT_EQ(event["object"]["metadata"]["name"], "c");
  EXPECT_EQ(event["object"]["apiVersion"], "v1");
  EXPECT_EQ(event["object"]["kind"], "Pod");
}

TEST_F(WatchTest, FromAResourceVersionOnlyLaterEventsInOrder) {
  client_->Post(kPods, PodBody("a"));
  const std::string rv = Now();
  client_->MergePatch(PodPath("a"), {{"metadata", {{"labels", {{"x", "1"}}}}}});
  client_->Delete(PodPath("a"));
  std::unique_ptr<WatchReader> watch = OpenWatch(std::string(kPods) + "?watch=1&resourceVersion=" + rv);
  json modified, deleted;
  ASSERT_TRUE(watch->Next(kWait, &modified).ok());
  ASSERT_TRUE(watch->Next(kWait, &deleted).ok());
  EXPECT_EQ(modified["type"], "MODIFIED");
  EXPECT_EQ(deleted["type"], "DELETED");
  EXPECT_LT(std::stoull(modified["object"]["metadata"]["resourceVersion"].get<std::string>()),
            std::stoull(deleted["object"]["metadata"]["resourceVersion"].get<std::string>()));
  EXPECT_EQ(deleted["object"]["metadata"]["resourceVersion"], Now());
}

TEST_F(WatchTest, HistoryBeyondTheWindowIsExpired) {
  const std::string start = Now();
  for (int i = 0; i < 10; ++i) client_->Post(kPods, PodBody("p" + std::to_string(i)));
  std::unique_ptr<WatchReader> watch = OpenWatch(std::string(kPods) + "?watch=1&resourceVersion=" + start);
  ASSERT_EQ(watch->status(), 200);
  json event;
  ASSERT_TRUE(watch->Next(kWait, &event).ok());
  EXPECT_EQ(event["type"], "ERROR");
  EXPECT_EQ(event["object"]["code"], 410);
  EXPECT_EQ(event["object"]["reason"], "Expired");
  EXPECT_EQ(watch->Next(kWait, &event).code(), Status::Code::kOutOfRange);
  EXPECT_TRUE(watch->ended_cleanly());
  // Another resource's history is its own.
  std::unique_ptr<WatchReader> jobs = OpenWatch(std::string(kJobs) + "?watch=1&resourceVersion=" + start);
  client_->Post(kJobs, TrainingJobBody("mnist"));
  ASSERT_TRUE(jobs->Next(kWait, &event).ok());
  EXPECT_EQ(event["type"], "ADDED");
}

TEST_F(WatchTest, AFutureResourceVersionIsATimeout) {
  TestResponse r = client_->Get(std::string(kPods) + "?watch=1&resourceVersion=999999");
  EXPECT_EQ(r.status, 504);
  EXPECT_EQ(r.json["reason"], "Timeout");
  EXPECT_EQ(client_->Get(std::string(kPods) + "?watch=1&resourceVersion=abc").status, 400);
}

TEST_F(WatchTest, SelectorsSendObjectsEnteringAndLeavingAsAddedAndDeleted) {
  client_->Post(kPods, PodBody("a", {{"role", "trainer"}}));
  std::unique_ptr<WatchReader> watch = OpenWatch(
      std::string(kPods) + "?watch=1&labelSelector=role%3Dtrainer&resourceVersion=" + Now());
  client_->MergePatch(PodPath("a"), {{"metadata", {{"labels", {{"role", "evaluator"}}}}}});
  client_->MergePatch(PodPath("a"), {{"metadata", {{"labels", {{"x", "1"}}}}}});  // still out
  client_->MergePatch(PodPath("a"), {{"metadata", {{"labels", {{"role", "trainer"}}}}}});
  client_->Post(kPods, PodBody("b", {{"role", "evaluator"}}));
  client_->Delete(PodPath("a"));
  std::vector<std::string> seen;
  for (int i = 0; i < 3; ++i) {
    json event;
    ASSERT_TRUE(watch->Next(kWait, &event).ok());
    seen.push_back(event["type"].get<std::string>() + " " +
                   event["object"]["metadata"]["name"].get<std::string>());
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"DELETED a", "ADDED a", "DELETED a"}));

  std::unique_ptr<WatchReader> on_node = OpenWatch(
      "/api/v1/pods?watch=1&fieldSelector=spec.nodeName%3Dnode-1&resourceVersion=" + Now());
  client_->Post(kPods, PodBody("elsewhere", json::object(), "node-2"));
  client_->Post(kPods, PodBody("here", json::object(), "node-1"));
  json event;
  ASSERT_TRUE(on_node->Next(kWait, &event).ok());
  EXPECT_EQ(event["object"]["metadata"]["name"], "here");
}

TEST_F(WatchTest, AWatchOfOneObjectSeesOnlyIt) {
  std::unique_ptr<WatchReader> watch =
      OpenWatch(PodPath("b") + "?watch=true&resourceVersion=" + Now());
  client_->Post(kPods, PodBody("a"));
  client_->Post(kPods, PodBody("b"));
  json event;
  ASSERT_TRUE(watch->Next(kWait, &event).ok());
  EXPECT_EQ(event["object"]["metadata"]["name"], "b");
  EXPECT_EQ(server_->CountRequests("watch", "pods"), 1u);
}

TEST_F(WatchTest, BookmarksCarryOnlyTheResourceVersion) {
  const std::string before = Now();
  client_->Post(kPods, PodBody("unrelated"));
  // Nothing changes from here on: the bookmark has the store's version.
  std::unique_ptr<WatchReader> watch = OpenWatch(
      std::string(kJobs) + "?watch=1&allowWatchBookmarks=true&resourceVersion=" + before);
  json event;
  ASSERT_TRUE(watch->Next(kWait, &event).ok());
  EXPECT_EQ(event, json({{"type", "BOOKMARK"},
                         {"object", {{"apiVersion", "gaptrain.io/v1alpha1"},
                                     {"kind", "TrainingJob"},
                                     {"metadata", {{"resourceVersion", Now()}}}}}}));
  // Without allowWatchBookmarks there are none: the stream just ends.
  std::unique_ptr<WatchReader> quiet =
      OpenWatch(std::string(kJobs) + "?watch=1&timeoutSeconds=1&resourceVersion=" + Now());
  std::vector<json> events;
  ASSERT_TRUE(quiet->ReadToEnd(kWait, &events).ok());
  EXPECT_TRUE(events.empty());
  EXPECT_TRUE(quiet->ended_cleanly());
}

TEST_F(WatchTest, TheStreamEndsAtTimeoutSecondsAndTheConnectionCanBeReused) {
  const auto start = std::chrono::steady_clock::now();
  TestResponse r = client_->Get(std::string(kPods) + "?watch=1&timeoutSeconds=1&resourceVersion=" + Now());
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "");
  EXPECT_GE(took, std::chrono::milliseconds(900));
  EXPECT_LT(took, std::chrono::seconds(5));
  EXPECT_EQ(client_->Get(kPods).status, 200);  // same keep-alive connection
}

TEST_F(WatchTest, CloseAllWatchesEndsStreamsCleanly) {
  std::unique_ptr<WatchReader> watch = OpenWatch(std::string(kPods) + "?watch=1&resourceVersion=" + Now());
  server_->CloseAllWatches();
  json event;
  EXPECT_EQ(watch->Next(kWait, &event).code(), Status::Code::kOutOfRange);
  EXPECT_TRUE(watch->ended_cleanly());
  // New watches work.
  std::unique_ptr<WatchReader> again = OpenWatch(std::string(kPods) + "?watch=1&resourceVersion=" + Now());
  client_->Post(kPods, PodBody("a"));
  ASSERT_TRUE(again->Next(kWait, &event).ok());
}

TEST_F(WatchTest, DropAllConnectionsCutsStreamsMidway) {
  std::unique_ptr<WatchReader> watch = OpenWatch(std::string(kPods) + "?watch=1&resourceVersion=" + Now());
  const auto start = std::chrono::steady_clock::now();
  server_->DropAllConnections();
  json event;
  EXPECT_EQ(watch->Next(kWait, &event).code(), Status::Code::kOutOfRange);
  EXPECT_FALSE(watch->ended_cleanly());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
}

TEST_F(WatchTest, ExpireWatchHistoryMakesOlderWatchesRelist) {
  client_->Post(kPods, PodBody("a"));
  const std::string rv = Now();
  std::unique_ptr<WatchReader> current = OpenWatch(std::string(kPods) + "?watch=1&resourceVersion=" + rv);
  client_->Post(kPods, PodBody("b"));
  json event;
  ASSERT_TRUE(current->Next(kWait, &event).ok());  // caught up before the expiry
  server_->ExpireWatchHistory();
  std::unique_ptr<WatchReader> old = OpenWatch(std::string(kPods) + "?watch=1&resourceVersion=" + rv);
  ASSERT_TRUE(old->Next(kWait, &event).ok());
  EXPECT_EQ(event["type"], "ERROR");
  // A watch from now is fine, and so is the one that had caught up.
  client_->Post(kPods, PodBody("c"));
  ASSERT_TRUE(current->Next(kWait, &event).ok());
  EXPECT_EQ(event["object"]["metadata"]["name"], "c");
}

TEST_F(WatchTest, TheStoreWatchHookSeesWhatClientsSee) {
  std::unique_ptr<ObjectStore::Watch> watch;
  ASSERT_TRUE(server_->Watch("pods", "default", "", "spec.nodeName=node-1", "0", &watch).ok());
  client_->Post(kPods, PodBody("a", json::object(), "node-1"));
  WatchEvent event;
  ASSERT_EQ(watch->Next(std::chrono::steady_clock::now() + kWait, &event),
            ObjectStore::Watch::Result::kEvent);
  EXPECT_EQ(event.type, "ADDED");
  EXPECT_EQ(event.object["metadata"]["name"], "a");
  EXPECT_EQ(watch->Next(std::chrono::steady_clock::now() + std::chrono::milliseconds(50), &event),
            ObjectStore::Watch::Result::kTimeout);
  EXPECT_FALSE(server_->Watch("pods", "default", "", "spec.image=x", "0", &watch).ok());
}

}  // namespace
}  // namespace kube_testing
}  // namespace gaptrain
