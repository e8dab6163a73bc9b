#include "operator/controller/work_queue.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <utility>

namespace gaptrain {
namespace controller {

Status WorkQueue::Validate(const Options& o) {
  if (o.clock == nullptr) return Status::InvalidArgument("work queue clock: must be set");
  if (o.base_delay.count() <= 0) {
    return Status::InvalidArgument("work queue base_delay: must be > 0");
  }
  if (o.max_delay < o.base_delay) {
    return Status::InvalidArgument("work queue max_delay: must be >= base_delay");
  }
  if (!std::isfinite(o.qps) || o.qps < 0) {
    return Status::InvalidArgument("work queue qps: must be finite and >= 0 (0 disables it)");
  }
  if (o.qps > 0 && o.burst < 1) {
    return Status::InvalidArgument("work queue burst: must be >= 1 when qps > 0");
  }
  return Status::OK();
}

WorkQueue::WorkQueue(const Options& options)
    : options_(options),
      clock_(options.clock),
      tokens_(options.burst),
      tokens_at_(options.clock->Now()) {
  assert(Validate(options).ok());
}

WorkQueue::~WorkQueue() { ShutDown(); }

void WorkQueue::AddLocked(const std::string& key) {
  if (shutting_down_) return;
  if (!dirty_.insert(key).second) return;
  if (processing_.count(key) != 0) return;  // queued again by Done()
  queue_.push_back(key);
  changed_.notify_all();
}

void WorkQueue::Add(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  AddLocked(key);
}

void WorkQueue::AddAfter(const std::string& key, Clock::Duration delay) {
  std::lock_guard<std::mutex> lock(mu_);
  if (shutting_down_) return;
  if (delay <= Clock::Duration::zero()) {
    AddLocked(key);
    return;
  }
  const Clock::TimePoint ready = AddSaturating(clock_->Now(), delay);
  auto existing = waiting_by_key_.find(key);
  if (existing != waiting_by_key_.end()) {
    if (existing->second.first <= ready) return;
    waiting_.erase({existing->second.first, existing->second.second, key});
    waiting_by_key_.erase(existing);
  }
  const uint64_t arrival = next_arrival_++;
  waiting_.insert({ready, arrival, key});
  waiting_by_key_[key] = {ready, arrival};
  changed_.notify_all();  // Get() waiters re-compute their deadline
}

Clock::Duration WorkQueue::BucketDelayLocked() {
  if (options_.qps <= 0) return Clock::Duration::zero();
  const Clock::TimePoint now = clock_->Now();
  const double elapsed = std::chrono::duration<double>(now - tokens_at_).count();
  tokens_at_ = now;
  tokens_ = std::min<double>(options_.burst, tokens_ + elapsed * options_.qps);
  tokens_ -= 1;  // a reservation: the bucket may go into debt
  if (tokens_ >= 0) return Clock::Duration::zero();
  return std::chrono::duration_cast<Clock::Duration>(
      std::chrono::duration<double>(-tokens_ / options_.qps));
}

void WorkQueue::AddRateLimited(const std::string& key) {
  Clock::Duration delay;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shutting_down_) return;
    auto it = backoff_.find(key);
    if (it == backoff_.end()) {
      const Backoff::Options backoff{options_.base_delay, options_.max_delay, 2.0, 0.0};
      it = backoff_.emplace(key, Backoff(backoff, /*seed=*/0)).first;
    }
    delay = std::max<Clock::Duration>(it->second.Next(), BucketDelayLocked());
  }
  AddAfter(key, delay);
}

void WorkQueue::Forget(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  backoff_.erase(key);
}

int WorkQueue::NumRequeues(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = backoff_.find(key);
  return it == backoff_.end() ? 0 : it->second.failures();
}

void WorkQueue::PromoteDueLocked() {
  if (waiting_.empty()) return;
  const Clock::TimePoint now = clock_->Now();
  while (!waiting_.empty() && std::get<0>(*waiting_.begin()) <= now) {
    const std::string key = std::get<2>(*waiting_.begin());
    waiting_.erase(waiting_.begin());
    waiting_by_key_.erase(key);
    AddLocked(key);
  }
}

bool WorkQueue::Get(std::string* key) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (shutting_down_) return false;
    PromoteDueLocked();
    if (!queue_.empty()) break;
    const Clock::TimePoint deadline =
        waiting_.empty() ? Clock::kForever : std::get<0>(*waiting_.begin());
    clock_->WaitUntil(lock, changed_, deadline);
  }
  *key = std::move(queue_.front());
  queue_.pop_front();
  processing_.insert(*key);
  dirty_.erase(*key);
  return true;
}

void WorkQueue::Done(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (processing_.erase(key) == 0) return;
  if (dirty_.count(key) != 0) queue_.push_back(key);
  changed_.notify_all();  // a Get() waiter, or ShutDownWithDrain()
}

void WorkQueue::ShutDown() {
  std::lock_guard<std::mutex> lock(mu_);
  shutting_down_ = true;
  changed_.notify_all();
}

void WorkQueue::ShutDownWithDrain() {
  std::unique_lock<std::mutex> lock(mu_);
  shutting_down_ = true;
  changed_.notify_all();
  changed_.wait(lock, [this] { return processing_.empty(); });
}

bool WorkQueue::ShuttingDown() const {
  std::lock_guard<std::mutex> lock(mu_);
  return shutting_down_;
}

size_t WorkQueue::Len() {
  std::lock_guard<std::mutex> lock(mu_);
  PromoteDueLocked();
  return queue_.size();
}

size_t WorkQueue::NumWaiting() {
  std::lock_guard<std::mutex> lock(mu_);
  PromoteDueLocked();
  return waiting_.size();
}

size_t WorkQueue::NumProcessing() const {
  std::lock_guard<std::mutex> lock(mu_);
  return processing_.size();
}

}  // namespace controller
}  // namespace gaptrain
