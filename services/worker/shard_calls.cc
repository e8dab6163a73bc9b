#include "services/worker/shard_calls.h"

namespace gaptrain {

ShardCalls::ShardCalls(size_t shards) {
  for (size_t i = 1; i < shards; ++i) threads_.emplace_back([this, i] { Serve(i); });
}

ShardCalls::~ShardCalls() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  start_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void ShardCalls::Run(const std::function<void(size_t)>& fn) {
  if (threads_.empty()) return fn(0);
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    running_ = threads_.size();
    ++generation_;
  }
  start_.notify_all();
  fn(0);
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [this] { return running_ == 0; });
  fn_ = nullptr;
}

void ShardCalls::Serve(size_t shard) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    start_.wait(lock, [&] { return stopping_ || generation_ != seen; });
    if (stopping_) return;
    seen = generation_;
    const std::function<void(size_t)>* fn = fn_;
    lock.unlock();
    (*fn)(shard);
    lock.lock();
    if (--running_ == 0) done_.notify_one();
  }
}

}  // namespace gaptrain
