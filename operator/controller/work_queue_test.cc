// Tests the WorkQueue's client-go semantics on a fake clock: de-duplication,
// the processing/dirty rule, AddAfter ordering, per-key backoff and the
// token bucket, Forget, shutdown with and without drain, and many producers
// and consumers at once.

#include "operator/controller/work_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "operator/controller/fake_clock.h"
#include "services/testing/test_processes.h"

namespace gaptrain {
namespace controller {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

class WorkQueueTest : public ::testing::Test {
 protected:
  WorkQueue::Options Options() {
    WorkQueue::Options options;
    options.clock = &clock_;
    options.qps = 0;
    return options;
  }

  // Gets a key, or "" when the queue has nothing ready (never blocks: the
  // caller checks Len() first).
  std::string Take(WorkQueue* queue) {
    if (queue->Len() == 0) return "";
    std::string key;
    EXPECT_TRUE(queue->Get(&key));
    return key;
  }

  // The key becomes ready exactly `delay` after now: not 1 ns earlier.
  void ExpectReadyAfter(WorkQueue* queue, Clock::Duration delay) {
    clock_.Advance(delay - nanoseconds(1));
    EXPECT_EQ(queue->Len(), 0u) << "ready before " << delay.count() << " ns";
    clock_.Advance(nanoseconds(1));
    EXPECT_EQ(queue->Len(), 1u) << "not ready after " << delay.count() << " ns";
  }

  FakeClock clock_;
};

TEST_F(WorkQueueTest, ValidatesOptions) {
  WorkQueue::Options options = Options();
  EXPECT_TRUE(WorkQueue::Validate(options).ok());
  options.base_delay = milliseconds(0);
  EXPECT_NE(WorkQueue::Validate(options).message().find("base_delay"), std::string::npos);
  options = Options();
  options.max_delay = milliseconds(1);
  EXPECT_NE(WorkQueue::Validate(options).message().find("max_delay"), std::string::npos);
  options = Options();
  options.qps = -1;
  EXPECT_NE(WorkQueue::Validate(options).message().find("qps"), std::string::npos);
  options = Options();
  options.qps = 5;
  options.burst = 0;
  EXPECT_NE(WorkQueue::Validate(options).message().find("burst"), std::string::npos);
  options = Options();
  options.clock = nullptr;
  EXPECT_EQ(WorkQueue::Validate(options).code(), Status::Code::kInvalidArgument);
}

TEST_F(WorkQueueTest, AddDeduplicatesAndKeepsOrder) {
  WorkQueue queue(Options());
  queue.Add("default/a");
  queue.Add("default/b");
  queue.Add("default/a");
  EXPECT_EQ(queue.Len(), 2u);
  EXPECT_EQ(Take(&queue), "default/a");
  EXPECT_EQ(Take(&queue), "default/b");
  EXPECT_EQ(Take(&queue), "");
}

TEST_F(WorkQueueTest, AKeyAddedWhileProcessingRunsAgainAfterDone) {
  WorkQueue queue(Options());
  queue.Add("a");
  ASSERT_EQ(Take(&queue), "a");
  queue.Add("a");
  queue.Add("a");
  EXPECT_EQ(queue.Len(), 0u) << "handed out twice while processing";
  EXPECT_EQ(queue.NumProcessing(), 1u);
  queue.Done("a");
  EXPECT_EQ(queue.Len(), 1u);
  EXPECT_EQ(Take(&queue), "a");
  queue.Done("a");
  EXPECT_EQ(queue.Len(), 0u) << "once re-run, the dirty mark is gone";
  queue.Done("a");  // a second Done is harmless
  EXPECT_EQ(queue.NumProcessing(), 0u);
}

TEST_F(WorkQueueTest, AddAfterReleasesKeysInTimeOrder) {
  WorkQueue queue(Options());
  queue.AddAfter("c", seconds(3));
  queue.AddAfter("a", seconds(1));
  queue.AddAfter("b", seconds(2));
  queue.AddAfter("now", seconds(0));
  EXPECT_EQ(Take(&queue), "now");
  EXPECT_EQ(queue.NumWaiting(), 3u);
  clock_.Advance(milliseconds(999));
  EXPECT_EQ(queue.Len(), 0u);
  clock_.Advance(seconds(2));
  EXPECT_EQ(queue.Len(), 2u);
  EXPECT_EQ(Take(&queue), "a");
  EXPECT_EQ(Take(&queue), "b");
  clock_.Advance(seconds(1));
  EXPECT_EQ(Take(&queue), "c");
  EXPECT_EQ(queue.NumWaiting(), 0u);
}

TEST_F(WorkQueueTest, AKeyWaitingTwiceKeepsTheEarlierTime) {
  WorkQueue queue(Options());
  queue.AddAfter("k", seconds(5));
  queue.AddAfter("k", seconds(1));
  queue.AddAfter("k", seconds(10));
  EXPECT_EQ(queue.NumWaiting(), 1u);
  ExpectReadyAfter(&queue, seconds(1));
  clock_.Advance(seconds(20));
  EXPECT_EQ(queue.Len(), 1u) << "the later times were dropped";
}

TEST_F(WorkQueueTest, ABlockedGetWakesWhenTheDelayEnds) {
  WorkQueue queue(Options());
  std::string got;
  std::thread consumer([&] { EXPECT_TRUE(queue.Get(&got)); });
  ASSERT_TRUE(clock_.WaitForWaiters(1, seconds(10)));
  const Clock::TimePoint start = clock_.Now();
  queue.AddAfter("later", seconds(1));
  // The consumer re-computes its deadline from the new key.
  ASSERT_TRUE(Eventually([&] { return clock_.NextDeadline() == start + seconds(1); }, seconds(10)));
  clock_.Advance(milliseconds(999));
  EXPECT_EQ(clock_.waiters(), 1u) << "woken before its time";
  clock_.Advance(milliseconds(1));
  consumer.join();
  EXPECT_EQ(got, "later");
}

TEST_F(WorkQueueTest, RateLimitedDelaysDoubleUpToTheCapAndForgetResets) {
  WorkQueue::Options options = Options();
  options.base_delay = milliseconds(5);
  options.max_delay = milliseconds(1000);
  WorkQueue queue(options);
  Clock::Duration expected = milliseconds(5);
  for (int i = 0; i < 10; ++i) {
    queue.AddRateLimited("k");
    ExpectReadyAfter(&queue, std::min<Clock::Duration>(expected, milliseconds(1000)));
    ASSERT_EQ(Take(&queue), "k");
    queue.Done("k");
    expected *= 2;
  }
  EXPECT_EQ(queue.NumRequeues("k"), 10);
  EXPECT_EQ(queue.NumRequeues("other"), 0) << "backoff is per key";
  queue.AddRateLimited("other");
  ExpectReadyAfter(&queue, milliseconds(5));
  ASSERT_EQ(Take(&queue), "other");
  queue.Done("other");

  queue.Forget("k");
  EXPECT_EQ(queue.NumRequeues("k"), 0);
  queue.AddRateLimited("k");
  ExpectReadyAfter(&queue, milliseconds(5));
}

TEST_F(WorkQueueTest, TheTokenBucketSpacesBurstsOut) {
  WorkQueue::Options options = Options();
  options.base_delay = milliseconds(1);
  options.qps = 10;
  options.burst = 2;
  WorkQueue queue(options);
  queue.AddRateLimited("a");
  queue.AddRateLimited("b");
  queue.AddRateLimited("c");  // the bucket is empty: 100 ms at 10 qps
  clock_.Advance(milliseconds(1));
  EXPECT_EQ(queue.Len(), 2u);
  clock_.Advance(milliseconds(98));
  EXPECT_EQ(queue.Len(), 2u);
  clock_.Advance(milliseconds(1));
  EXPECT_EQ(queue.Len(), 3u);
}

TEST_F(WorkQueueTest, ShutDownEndsGetAtOnceAndIgnoresAdds) {
  WorkQueue queue(Options());
  std::atomic<bool> got{true};
  std::thread consumer([&] {
    std::string key;
    got = queue.Get(&key);
  });
  ASSERT_TRUE(clock_.WaitForWaiters(1, seconds(10)));
  queue.ShutDown();
  consumer.join();
  EXPECT_FALSE(got);
  queue.Add("late");
  queue.AddAfter("later", seconds(1));
  queue.AddRateLimited("limited");
  EXPECT_EQ(queue.Len(), 0u);
  EXPECT_EQ(queue.NumWaiting(), 0u);
  EXPECT_TRUE(queue.ShuttingDown());
}

TEST_F(WorkQueueTest, ShutDownHandsOutNothingMoreEvenWithKeysQueued) {
  WorkQueue queue(Options());
  queue.Add("a");
  queue.Add("b");
  queue.ShutDown();
  std::string key;
  EXPECT_FALSE(queue.Get(&key));
  queue.ShutDown();  // idempotent
}

TEST_F(WorkQueueTest, ShutDownWithDrainWaitsForTheKeysInProgress) {
  WorkQueue queue(Options());
  queue.Add("a");
  queue.Add("b");
  std::string key;
  ASSERT_TRUE(queue.Get(&key));
  ASSERT_EQ(key, "a");
  std::atomic<bool> drained{false};
  std::thread stopper([&] {
    queue.ShutDownWithDrain();
    drained = true;
  });
  ASSERT_TRUE(Eventually([&] { return queue.ShuttingDown(); }, seconds(10)));
  EXPECT_FALSE(queue.Get(&key)) << "b must not start once draining";
  EXPECT_FALSE(drained) << "returned while a was in progress";
  queue.Done("a");
  stopper.join();
  EXPECT_TRUE(drained);
  EXPECT_EQ(queue.NumProcessing(), 0u);
}

TEST_F(WorkQueueTest, ShutDownWithDrainReturnsAtOnceWhenIdle) {
  WorkQueue queue(Options());
  queue.Add("a");
  queue.ShutDownWithDrain();
  EXPECT_TRUE(queue.ShuttingDown());
}

// Producers bump a key's version, then add it; consumers record the version
// they see when they start on a key. No key may be processed by two
// consumers at once, and each key's last pass must see its final version.
TEST_F(WorkQueueTest, ConcurrentProducersAndConsumers) {
  WorkQueue queue(Options());
  constexpr int kKeys = 16;
  constexpr int kProducers = 4;
  constexpr int kAddsPerProducer = 500;
  std::atomic<int> versions[kKeys];
  for (auto& v : versions) v = 0;

  std::mutex mu;
  std::set<std::string> in_flight;
  std::map<std::string, int> last_seen;
  std::atomic<int> overlaps{0};
  std::atomic<int> passes{0};

  std::vector<std::thread> consumers;
  for (int c = 0; c < 4; ++c) {
    consumers.emplace_back([&] {
      std::string key;
      while (queue.Get(&key)) {
        const int index = std::stoi(key.substr(1));
        {
          std::lock_guard<std::mutex> lock(mu);
          if (!in_flight.insert(key).second) ++overlaps;
          last_seen[key] = versions[index].load();
        }
        std::this_thread::yield();  // widen the window for a second worker
        {
          std::lock_guard<std::mutex> lock(mu);
          in_flight.erase(key);
        }
        ++passes;
        queue.Done(key);
      }
    });
  }
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (int i = 0; i < kAddsPerProducer; ++i) {
        const int index = (i * 7 + p) % kKeys;
        ++versions[index];
        queue.Add("k" + std::to_string(index));
      }
    });
  }
  for (std::thread& t : producers) t.join();
  auto all_seen = [&] {
    std::lock_guard<std::mutex> lock(mu);
    for (int i = 0; i < kKeys; ++i) {
      if (last_seen["k" + std::to_string(i)] != versions[i].load()) return false;
    }
    return true;
  };
  EXPECT_TRUE(Eventually(all_seen, seconds(30))) << "a key missed its last change";
  queue.ShutDown();
  for (std::thread& t : consumers) t.join();
  EXPECT_EQ(overlaps, 0);
  EXPECT_LE(passes, kProducers * kAddsPerProducer);
}

}  // namespace
}  // namespace controller
}  // namespace gaptrain
