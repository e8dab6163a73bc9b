// Tests the Reflector against the scripted server, for what a real server
// cannot be made to do on demand or does not send: the watch's exact query,
// a BOOKMARK's resourceVersion taken up at once, a watch request answered
// 410 (kube-apiserver 1.26 answers 200 and an ERROR event, which
// client_api_test meets for real), a 500 and a connection cut inside an
// event with the seeded backoff, an idle watch, and a prompt Stop in every
// state. List-then-watch, resuming after the server ends a watch or drops
// it, re-listing after a real 410 and backing off from a 503 are tested
// against the real server in client_api_test.

#include "operator/kube/reflector.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "operator/testing/scripted_server.h"
#include "operator/testing/kube_test_support.h"

namespace gaptrain {
namespace kube {
namespace {

using std::chrono::milliseconds;

class RecordingHandler : public ReflectorHandler {
 public:
  void OnReplace(std::vector<nlohmann::json> items, const std::string& rv) override {
    std::string line = "replace@" + rv + ":";
    for (const auto& item : items) {
      line += " " + item["metadata"]["name"].get<std::string>() +
              (show_spec && item.contains("spec") ? "+spec" : "");
    }
    Record(line);
  }
  void OnAdd(const nlohmann::json& o) override { Record("add " + Describe(o)); }
  void OnUpdate(const nlohmann::json& o) override { Record("update " + Describe(o)); }
  void OnDelete(const nlohmann::json& o) override { Record("delete " + Describe(o)); }

  std::vector<std::string> calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  // Calls then say which objects came with a spec.
  bool show_spec = false;

 private:
  std::string Describe(const nlohmann::json& o) const {
    return o["metadata"]["name"].get<std::string>() + "@" +
           o["metadata"]["resourceVersion"].get<std::string>() +
           (show_spec && o.contains("spec") ? "+spec" : "");
  }
  void Record(const std::string& line) {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.push_back(line);
  }
  std::mutex mu_;
  std::vector<std::string> calls_;
};

ScriptedReply List(const std::vector<std::string>& names, const std::string& rv) {
  std::vector<nlohmann::json> items;
  for (const std::string& n : names) {
    items.push_back({{"metadata", {{"name", n}, {"resourceVersion", rv}}}});
  }
  return ListReply("TrainingJobList", "gaptrain.io/v1alpha1", items, rv);
}

// A watch that stays open without events until the client leaves.
ScriptedReply QuietWatch() { return WatchReply({}, false); }

ScriptedReply Recorded(const std::string& name) {
  ScriptedReply reply;
  Status s = ReadRecordedFile(name, &reply.raw);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return reply;
}

class ReflectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(ScriptedServer::Start({}, &server_).ok());
    ClusterConfig config;
    config.server = server_->url();
    ClientOptions client_options;
    client_options.request_timeout = milliseconds(10000);
    ASSERT_TRUE(Client::New(config, client_options, &client_).ok());
    options_.backoff.initial = milliseconds(5);
    options_.backoff.max = milliseconds(20);
    options_.backoff_seed = 7;
    options_.watch_timeout_seconds = 60;
  }

  void TearDown() override { StopReflector(); }

  void StartReflector() {
    reflector_ = std::make_unique<Reflector>(client_.get(), kTrainingJobs, "default", options_,
                                             &handler_);
    thread_ = std::thread([this] { reflector_->Run(); });
  }

  // Stops the reflector and says whether Run returned within two seconds.
  bool StopReflector() {
    if (!thread_.joinable()) return true;
    const auto start = std::chrono::steady_clock::now();
    reflector_->Stop();
    thread_.join();
    return std::chrono::steady_clock::now() - start < std::chrono::seconds(2);
  }

  // Requests 1..n as "list" or "watch@RV".
  std::vector<std::string> Sent() {
    std::vector<std::string> out;
    for (const ReceivedRequest& r : server_->requests()) {
      auto rv = r.query.find("resourceVersion");
      out.push_back(r.query.count("watch") ? "watch@" + (rv == r.query.end() ? "" : rv->second)
                                           : "list");
    }
    return out;
  }

  std::unique_ptr<ScriptedServer> server_;
  std::unique_ptr<Client> client_;
  Reflector::Options options_;
  RecordingHandler handler_;
  std::unique_ptr<Reflector> reflector_;
  std::thread thread_;
};

TEST_F(ReflectorTest, ResumesFromABookmarksResourceVersion) {
  server_->Push(List({}, "10"));
  server_->Push(WatchReply({R"({"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"11"}}})",
                         R"({"type":"BOOKMARK","object":{"kind":"TrainingJob","metadata":{"resourceVersion":"57"}}})"},
                        /*end=*/true));
  server_->Push(QuietWatch());
  StartReflector();
  ASSERT_TRUE(server_->WaitForRequests(3, milliseconds(10000)));
  EXPECT_EQ(Sent(), (std::vector<std::string>{"list", "watch@10", "watch@57"}));
  EXPECT_EQ(handler_.calls(), (std::vector<std::string>{"replace@10:", "add a@11"}));
  EXPECT_EQ(reflector_->resource_version(), "57");
  const ReceivedRequest watch = server_->requests()[1];
  EXPECT_EQ(watch.path, "/apis/gaptrain.io/v1alpha1/namespaces/default/trainingjobs");
  EXPECT_EQ(watch.query, (std::map<std::string, std::string>{{"watch", "1"},
                                                             {"allowWatchBookmarks", "true"},
                                                             {"resourceVersion", "10"},
                                                             {"timeoutSeconds", "60"}}));
}

// Options::transform edits every listed item (page by page) and every
// watched object before the handler sees it; never a BOOKMARK.
TEST_F(ReflectorTest, TheTransformEditsEveryObjectBeforeTheHandler) {
  std::vector<nlohmann::json> items;
  for (const char* n : {"a", "b", "c"}) {
    items.push_back({{"metadata", {{"name", n}, {"resourceVersion", "10"}}}, {"spec", 1}});
  }
  ScriptedReply first = ListReply("TrainingJobList", "gaptrain.io/v1alpha1", {items[0], items[1]}, "");
  nlohmann::json page = nlohmann::json::parse(first.body);
  page["metadata"]["continue"] = "next";
  first.body = page.dump();
  server_->Push(first);
  server_->Push(ListReply("TrainingJobList", "gaptrain.io/v1alpha1", {items[2]}, "10"));
  server_->Push(WatchReply(
      {R"({"type":"ADDED","object":{"metadata":{"name":"d","resourceVersion":"11"},"spec":2}})",
       R"({"type":"MODIFIED","object":{"metadata":{"name":"d","resourceVersion":"12"},"spec":3}})",
       R"({"type":"BOOKMARK","object":{"kind":"TrainingJob","metadata":{"resourceVersion":"13"}}})",
       R"({"type":"DELETED","object":{"metadata":{"name":"d","resourceVersion":"14"},"spec":3}})"},
      /*end=*/true));
  server_->Push(QuietWatch());
  std::mutex mu;
  std::vector<std::string> transformed;
  options_.page_size = 2;
  options_.transform = [&](nlohmann::json* object) {
    std::lock_guard<std::mutex> lock(mu);
    transformed.push_back((*object)["metadata"].value("name", "?"));
    object->erase("spec");
  };
  handler_.show_spec = true;
  StartReflector();
  // The second watch comes once the first's events were all handed over.
  ASSERT_TRUE(server_->WaitForRequests(4, milliseconds(10000)));
  EXPECT_EQ(Sent(), (std::vector<std::string>{"list", "list", "watch@10", "watch@14"}));
  EXPECT_EQ(handler_.calls(),
            (std::vector<std::string>{"replace@10: a b c", "add d@11", "update d@12", "delete d@14"}));
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(transformed, (std::vector<std::string>{"a", "b", "c", "d", "d", "d"}));
}

// kube-apiserver 1.26 answers a too-old resourceVersion with 200 and an
// ERROR event (client_api_test); an answer of 410 to the watch request
// itself must re-list just the same.
TEST_F(ReflectorTest, RelistsWhenTheWatchRequestIsAnswered410) {
  server_->Push(List({"old"}, "100"));
  ScriptedReply gone;
  gone.status = 410;
  gone.body = R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version","reason":"Gone","code":410})";
  server_->Push(gone);
  server_->Push(List({"new-c"}, "300"));
  server_->Push(QuietWatch());
  StartReflector();
  ASSERT_TRUE(server_->WaitForRequests(4, milliseconds(10000)));
  EXPECT_EQ(Sent(), (std::vector<std::string>{"list", "watch@100", "list", "watch@300"}));
  EXPECT_EQ(handler_.calls(),
            (std::vector<std::string>{"replace@100: old", "replace@300: new-c"}));
  const Reflector::Stats stats = reflector_->stats();
  EXPECT_EQ(stats.expired, 1u);
  EXPECT_EQ(stats.failures, 0u) << "a 410 re-lists at once, without backoff";
}

TEST_F(ReflectorTest, ReconnectsAfterFailuresWithTheSeededBackoff) {
  ScriptedReply broken;
  broken.status = 500;
  broken.body = R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"etcd is down","reason":"InternalError","code":500})";
  server_->Push(broken);
  server_->Push(List({"mnist"}, "214"));
  ScriptedReply cut = Recorded("watch-trainingjobs.http");
  cut.cut_after = cut.raw.find("\"MODIFIED\"", cut.raw.find("\"MODIFIED\"") + 1) + 5;
  server_->Push(cut);  // one whole event, then the connection breaks
  server_->Push(QuietWatch());
  StartReflector();
  ASSERT_TRUE(server_->WaitForRequests(4, milliseconds(10000)));
  EXPECT_EQ(Sent(), (std::vector<std::string>{"list", "list", "watch@214", "watch@215"}));
  EXPECT_EQ(handler_.calls(),
            (std::vector<std::string>{"replace@214: mnist", "update mnist@215"}));
  const Reflector::Stats stats = reflector_->stats();
  EXPECT_EQ(stats.failures, 2u);
  EXPECT_EQ(stats.last_error.code(), Status::Code::kUnavailable);
  // Success in between reset the backoff, so both waits were its first delay.
  Backoff expected(options_.backoff, options_.backoff_seed);
  const milliseconds first = expected.Next();
  EXPECT_EQ(stats.last_backoff, first);
  EXPECT_GE(first, milliseconds(2));
  EXPECT_LE(first, milliseconds(5));
}

TEST_F(ReflectorTest, AnIdleWatchIsResumedWithoutBackoff) {
  options_.idle_timeout = milliseconds(100);
  server_->Push(List({}, "5"));
  server_->Push(QuietWatch());
  server_->Push(QuietWatch());
  StartReflector();
  ASSERT_TRUE(server_->WaitForRequests(3, milliseconds(10000)));
  EXPECT_EQ(Sent(), (std::vector<std::string>{"list", "watch@5", "watch@5"}));
  const Reflector::Stats stats = reflector_->stats();
  EXPECT_EQ(stats.idle_timeouts, 1u);
  EXPECT_EQ(stats.failures, 0u);
}

TEST_F(ReflectorTest, StopsPromptlyWhileListingWatchingOrWaiting) {
  ScriptedReply hang;
  hang.hang = true;
  server_->Push(hang);
  StartReflector();
  ASSERT_TRUE(server_->WaitForRequests(1, milliseconds(10000)));
  EXPECT_TRUE(StopReflector()) << "while the list hangs";
  EXPECT_TRUE(handler_.calls().empty());
  EXPECT_FALSE(reflector_->has_synced());

  server_->Push(List({}, "1"));
  server_->Push(QuietWatch());
  StartReflector();
  ASSERT_TRUE(server_->WaitForRequests(3, milliseconds(10000)));
  EXPECT_TRUE(StopReflector()) << "while watching";

  options_.backoff.initial = std::chrono::minutes(10);
  options_.backoff.max = std::chrono::minutes(10);
  ScriptedReply broken;
  broken.status = 503;
  server_->Push(broken);
  StartReflector();
  ASSERT_TRUE(server_->WaitForRequests(4, milliseconds(10000)));
  // The failure is recorded just before the wait starts.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (reflector_->stats().failures == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  EXPECT_EQ(reflector_->stats().failures, 1u);
  EXPECT_TRUE(StopReflector()) << "during a ten-minute backoff";
}

}  // namespace
}  // namespace kube
}  // namespace gaptrain
