// ShardCalls: runs one call per master shard at once (spec.master.shards),
// each on a thread of its own kept for the session's life: a trainer calls
// every shard once or twice per step, and a thread made per call would
// cost as much as the call on a small model (and page faults: a fresh
// stack each time).
//
// What callers may rely on: Run(fn) calls fn(i) exactly once for every
// i < shards, fn(0) on the calling thread and the others on their own
// threads, all at once, and returns when every call has returned; calls to
// Run never overlap (one session owns it). With one shard it makes no
// thread and Run is a plain call.

#ifndef GAPTRAIN_SERVICES_WORKER_SHARD_CALLS_H_
#define GAPTRAIN_SERVICES_WORKER_SHARD_CALLS_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace gaptrain {

class ShardCalls {
 public:
  explicit ShardCalls(size_t shards);
  ~ShardCalls();
  ShardCalls(const ShardCalls&) = delete;
  ShardCalls& operator=(const ShardCalls&) = delete;

  size_t shards() const { return threads_.size() + 1; }
  // Runs fn(i) for every shard i, as above.
  void Run(const std::function<void(size_t shard)>& fn);

 private:
  void Serve(size_t shard);

  std::mutex mu_;
  std::condition_variable start_, done_;
  const std::function<void(size_t)>* fn_ = nullptr;  // the current Run's
  uint64_t generation_ = 0;  // Runs started
  size_t running_ = 0;       // threads still in the current Run
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_WORKER_SHARD_CALLS_H_
