// Tests the Controller on a fake clock: a failing reconcile is retried with
// growing backoff and its backoff forgotten on success; requeue_after runs
// it again; one key never runs on two workers at once while others
// proceed; exceptions count as errors; Start waits for the informers'
// sync (and times out); Stop drains; the observer hears every reconcile.

#include "operator/controller/controller.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "operator/controller/fake_clock.h"
#include "operator/testing/kube_test_support.h"
#include "operator/testing/scripted_server.h"
#include "services/testing/test_processes.h"

namespace gaptrain {
namespace controller {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class RecordingObserver : public ControllerObserver {
 public:
  void OnReconciled(const std::string& controller, const ReconcileRecord& record) override {
    std::lock_guard<std::mutex> lock(mu_);
    EXPECT_EQ(controller, "test");
    records_.push_back(record);
    changed_.notify_all();
  }

  bool WaitForRecords(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, seconds(10), [&] { return records_.size() >= n; });
  }

  std::vector<ReconcileRecord> records() {
    std::lock_guard<std::mutex> lock(mu_);
    return records_;
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::vector<ReconcileRecord> records_;
};

// A gate reconciles can wait at until the test opens it.
class Gate {
 public:
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    ++waiting_;
    changed_.notify_all();
    changed_.wait(lock, [&] { return open_; });
    --waiting_;
  }
  bool WaitForWaiting(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, seconds(10), [&] { return waiting_ >= n; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  int waiting_ = 0;
  bool open_ = false;
};

class ControllerTest : public ::testing::Test {
 protected:
  Controller::Options Options(int workers) {
    Controller::Options options;
    options.name = "test";
    options.workers = workers;
    options.queue.clock = &clock_;
    options.queue.qps = 0;
    options.queue.base_delay = milliseconds(5);
    options.observer = &observer_;
    return options;
  }

  void Make(int workers, Controller::ReconcileFunction reconcile) {
    Status s = Controller::New(Options(workers), std::move(reconcile), &controller_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  // True once a worker waits for exactly `t` (the next key's time).
  bool NextWakeAt(Clock::TimePoint t) {
    return Eventually([&] { return clock_.NextDeadline() == t; }, seconds(10));
  }

  FakeClock clock_;
  RecordingObserver observer_;
  std::unique_ptr<Controller> controller_;
};

TEST_F(ControllerTest, NewValidatesItsOptions) {
  std::unique_ptr<Controller> c;
  auto ok = [](const std::string&) { return Result::Done(); };
  Controller::Options options = Options(0);
  EXPECT_NE(Controller::New(options, ok, &c).message().find("workers"), std::string::npos);
  EXPECT_NE(Controller::New(Options(1), nullptr, &c).message().find("reconcile"),
            std::string::npos);
  options = Options(1);
  options.queue.max_delay = milliseconds(1);
  EXPECT_NE(Controller::New(options, ok, &c).message().find("max_delay"), std::string::npos);
  options = Options(1);
  options.name = "";
  EXPECT_EQ(Controller::New(options, ok, &c).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(c, nullptr);
}

TEST_F(ControllerTest, AFailingReconcileIsRetriedWithBackoffUntilItSucceeds) {
  std::atomic<int> calls{0};
  Make(2, [&](const std::string& key) {
    EXPECT_EQ(key, "default/mnist");
    if (++calls <= 2) return Result::Error(Status::Unavailable("apiserver down"), "ApiDown");
    return Result::Done();
  });
  ASSERT_TRUE(controller_->Start().ok());
  const Clock::TimePoint t0 = clock_.Now();
  controller_->queue()->Add("default/mnist");
  ASSERT_TRUE(observer_.WaitForRecords(1));
  ASSERT_TRUE(NextWakeAt(t0 + milliseconds(5))) << "first retry after base_delay";
  clock_.Advance(milliseconds(4));
  EXPECT_EQ(calls, 1);
  clock_.Advance(milliseconds(1));
  ASSERT_TRUE(observer_.WaitForRecords(2));
  ASSERT_TRUE(NextWakeAt(t0 + milliseconds(5 + 10))) << "the delay doubles";
  clock_.Advance(milliseconds(10));
  ASSERT_TRUE(observer_.WaitForRecords(3));
  controller_->Stop();

  EXPECT_EQ(calls, 3);
  EXPECT_EQ(controller_->queue()->NumRequeues("default/mnist"), 0) << "success forgets";
  const std::vector<ReconcileRecord> records = observer_.records();
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].reason, "ApiDown");
  EXPECT_EQ(records[0].status.code(), Status::Code::kUnavailable);
  EXPECT_TRUE(records[2].status.ok());
  EXPECT_EQ(records[2].reason, "");
  const Controller::Stats stats = controller_->stats();
  EXPECT_EQ(stats.reconciles, 3u);
  EXPECT_EQ(stats.errors, 2u);
  EXPECT_EQ(stats.errors_by_reason, (std::map<std::string, uint64_t>{{"ApiDown", 2}}));
}

TEST_F(ControllerTest, AnErrorWithoutAReasonIsNamedByItsCode) {
  std::atomic<int> calls{0};
  Make(1, [&](const std::string&) {
    if (++calls == 1) return Result::Error(Status::NotFound("gone"));
    return Result::Done();
  });
  ASSERT_TRUE(controller_->Start().ok());
  controller_->queue()->Add("k");
  ASSERT_TRUE(observer_.WaitForRecords(1));
  EXPECT_EQ(observer_.records()[0].reason, "NOT_FOUND");
}

TEST_F(ControllerTest, RequeueAfterRunsTheKeyAgainLater) {
  std::atomic<int> calls{0};
  Make(1, [&](const std::string&) {
    return ++calls == 1 ? Result::RequeueAfter(seconds(30)) : Result::Done();
  });
  ASSERT_TRUE(controller_->Start().ok());
  const Clock::TimePoint t0 = clock_.Now();
  controller_->queue()->Add("default/mnist");
  ASSERT_TRUE(observer_.WaitForRecords(1));
  ASSERT_TRUE(NextWakeAt(t0 + seconds(30)));
  EXPECT_EQ(calls, 1);
  clock_.Advance(seconds(30));
  ASSERT_TRUE(observer_.WaitForRecords(2));
  controller_->Stop();
  EXPECT_EQ(calls, 2);
  const std::vector<ReconcileRecord> records = observer_.records();
  ASSERT_TRUE(records[0].requeue_after.has_value());
  EXPECT_EQ(*records[0].requeue_after, seconds(30));
  EXPECT_EQ(controller_->stats().requeues_after, 1u);
  EXPECT_EQ(controller_->stats().errors, 0u);
}

TEST_F(ControllerTest, OneKeyNeverRunsOnTwoWorkersWhileOthersProceed) {
  Gate gate;
  std::mutex mu;
  std::map<std::string, int> running, most, runs;
  Make(4, [&](const std::string& key) {
    {
      std::lock_guard<std::mutex> lock(mu);
      most[key] = std::max(most[key], ++running[key]);
      ++runs[key];
    }
    if (key == "slow" && runs["slow"] == 1) gate.Wait();
    std::lock_guard<std::mutex> lock(mu);
    --running[key];
    return Result::Done();
  });
  ASSERT_TRUE(controller_->Start().ok());
  controller_->queue()->Add("slow");
  ASSERT_TRUE(gate.WaitForWaiting(1));
  for (int i = 0; i < 5; ++i) controller_->queue()->Add("slow");  // while it runs
  controller_->queue()->Add("x");
  controller_->queue()->Add("y");
  ASSERT_TRUE(observer_.WaitForRecords(2)) << "the other workers are free";
  EXPECT_EQ(controller_->stats().in_flight, 1u);
  gate.Open();
  ASSERT_TRUE(observer_.WaitForRecords(4));
  controller_->Stop();
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(most["slow"], 1);
  EXPECT_EQ(runs["slow"], 2) << "the adds during the run make exactly one more run";
  EXPECT_EQ(runs["x"], 1);
  EXPECT_EQ(observer_.records().size(), 4u);
}

TEST_F(ControllerTest, AThrowingReconcileIsAnInternalErrorAndIsRetried) {
  std::atomic<int> calls{0};
  Make(1, [&](const std::string&) -> Result {
    if (++calls == 1) throw std::runtime_error("bad object");
    return Result::Done();
  });
  ASSERT_TRUE(controller_->Start().ok());
  controller_->queue()->Add("k");
  ASSERT_TRUE(observer_.WaitForRecords(1));
  ASSERT_TRUE(NextWakeAt(clock_.Now() + milliseconds(5)));
  clock_.Advance(milliseconds(5));
  ASSERT_TRUE(observer_.WaitForRecords(2));
  const std::vector<ReconcileRecord> records = observer_.records();
  EXPECT_EQ(records[0].status.code(), Status::Code::kInternal);
  EXPECT_NE(records[0].status.message().find("bad object"), std::string::npos);
  EXPECT_EQ(records[0].reason, "Exception");
  EXPECT_TRUE(records[1].status.ok());
}

TEST_F(ControllerTest, TheObserverGetsDurationsOnTheControllersClock) {
  Make(1, [&](const std::string&) {
    clock_.Advance(milliseconds(250));
    return Result::Done();
  });
  ASSERT_TRUE(controller_->Start().ok());
  controller_->queue()->Add("k");
  ASSERT_TRUE(observer_.WaitForRecords(1));
  EXPECT_EQ(observer_.records()[0].duration, milliseconds(250));
  EXPECT_EQ(observer_.records()[0].key, "k");
  const Controller::Stats stats = controller_->stats();
  EXPECT_EQ(stats.total_duration, milliseconds(250));
  EXPECT_EQ(stats.max_duration, milliseconds(250));
}

TEST_F(ControllerTest, StopLetsReconcilesInFlightFinishAndStartsNoMore) {
  Gate gate;
  std::atomic<int> calls{0};
  Make(1, [&](const std::string&) {
    ++calls;
    gate.Wait();
    return Result::Done();
  });
  ASSERT_TRUE(controller_->Start().ok());
  controller_->queue()->Add("first");
  ASSERT_TRUE(gate.WaitForWaiting(1));
  controller_->queue()->Add("second");
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    controller_->Stop();
    stopped = true;
  });
  ASSERT_TRUE(Eventually([&] { return controller_->queue()->ShuttingDown(); }, seconds(10)));
  EXPECT_FALSE(stopped) << "Stop returned while a reconcile was running";
  gate.Open();
  stopper.join();
  EXPECT_TRUE(stopped);
  EXPECT_EQ(calls, 1) << "second was started after Stop";
  ASSERT_EQ(observer_.records().size(), 1u);
  EXPECT_TRUE(observer_.records()[0].status.ok());
  controller_->queue()->Add("third");
  EXPECT_EQ(controller_->queue()->Len(), 1u) << "second stays queued, third is ignored";
  controller_->Stop();  // idempotent
}

TEST_F(ControllerTest, StopBeforeStartCancelsIt) {
  Make(1, [](const std::string&) { return Result::Done(); });
  controller_->Stop();
  EXPECT_EQ(controller_->Start().code(), Status::Code::kCancelled);
}

// With a real informer: Start waits for its sync, then a child's change
// reconciles its owner (by ownerReference, or by label).
class ControllerWithInformerTest : public ControllerTest {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kube::ScriptedServer::Start({}, &server_).ok());
    kube::ClusterConfig config;
    config.server = server_->url();
    ASSERT_TRUE(kube::Client::New(config, kube::ClientOptions(), &client_).ok());
    Informer::Options options;
    options.reflector.backoff.initial = milliseconds(1);
    options.reflector.backoff.max = milliseconds(5);
    informer_ = std::make_unique<Informer>(client_.get(), kube::kPods, "default", options);
  }

  void TearDown() override {
    if (controller_ != nullptr) controller_->Stop();
    informer_->Stop();
  }

  std::unique_ptr<kube::ScriptedServer> server_;
  std::unique_ptr<kube::Client> client_;
  std::unique_ptr<Informer> informer_;
};

nlohmann::json ChildPod(const std::string& name, const nlohmann::json& owner_refs,
                        const std::string& job_label) {
  nlohmann::json pod = {
      {"metadata", {{"name", name}, {"namespace", "default"}, {"resourceVersion", "1"}}}};
  if (!owner_refs.is_null()) pod["metadata"]["ownerReferences"] = owner_refs;
  if (!job_label.empty()) pod["metadata"]["labels"]["gaptrain.io/job-name"] = job_label;
  return pod;
}

TEST_F(ControllerWithInformerTest, StartWaitsForTheSyncThenOwnersAreReconciled) {
  std::mutex mu;
  std::vector<std::string> keys;
  Make(1, [&](const std::string& key) {
    std::lock_guard<std::mutex> lock(mu);
    keys.push_back(key);
    return Result::Done();
  });
  ASSERT_TRUE(
      controller_
          ->Watch(informer_.get(), OwnerKey({"gaptrain.io", "TrainingJob", "gaptrain.io/job-name"}))
          .ok());
  ASSERT_TRUE(informer_->Start().ok());
  std::atomic<bool> started{false};
  Status start_status;
  std::thread starter([&] {
    start_status = controller_->Start();
    started = true;
  });
  // No list answered yet (the server says 500 and the informer retries).
  ASSERT_TRUE(server_->WaitForRequests(2, seconds(10)));
  EXPECT_FALSE(started) << "workers started before the cache synced";
  const nlohmann::json owned = nlohmann::json::array({{{"apiVersion", "gaptrain.io/v1alpha1"},
                                                       {"kind", "TrainingJob"},
                                                       {"name", "mnist"},
                                                       {"uid", "u1"},
                                                       {"controller", true}}});
  server_->Push(kube::ListReply(
      "PodList", "v1",
      {ChildPod("mnist-master", owned, "mnist"), ChildPod("fmnist-trainer-0", nullptr, "fmnist"),
       ChildPod("stray", nullptr, "")},
      "9"));
  server_->Push(kube::WatchReply({}, /*end=*/false));
  starter.join();
  ASSERT_TRUE(start_status.ok()) << start_status.ToString();
  EXPECT_EQ(controller_->Watch(informer_.get(), OwnKey()).code(), Status::Code::kFailedPrecondition)
      << "Watch after Start";
  ASSERT_TRUE(observer_.WaitForRecords(2));
  controller_->Stop();
  std::lock_guard<std::mutex> lock(mu);
  // The list is delivered in key order: fmnist-trainer-0 before mnist-master.
  EXPECT_EQ(keys, (std::vector<std::string>{"default/fmnist", "default/mnist"}));
}

TEST_F(ControllerWithInformerTest, StartTimesOutNamingTheInformerThatDidNotSync) {
  Controller::Options options = Options(1);
  options.sync_timeout = milliseconds(50);
  ASSERT_TRUE(Controller::New(
                  options, [](const std::string&) { return Result::Done(); }, &controller_)
                  .ok());
  ASSERT_TRUE(controller_->Watch(informer_.get(), OwnKey()).ok());
  Status s = controller_->Start();  // the informer was never started
  EXPECT_EQ(s.code(), Status::Code::kDeadlineExceeded);
  EXPECT_NE(s.message().find("pods in 'default'"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace controller
}  // namespace gaptrain
