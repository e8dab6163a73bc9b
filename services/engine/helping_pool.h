// HelpingPool: threads that help a caller through a loop of independent
// units when they are free, and stay out of its way when they are not.
//
// Run(n, helpers, fn) calls fn(i) for every i in [0, n) exactly once. The
// caller claims units itself from a shared counter, and up to `helpers`
// pool threads claim from the same counter once they wake. The caller never
// waits for a helper that has not started: on a machine whose cores are
// busy (a master receiving other pushes) it runs the whole loop alone,
// paying only a wake-up; a helper that did start costs it at most the rest
// of the one unit that helper is running. This is why a master can ask for
// as many update threads as it has cores without losing throughput when
// the cores are taken by network work.
//
// Which thread runs a unit is not deterministic; callers that need
// deterministic results keep one output per unit and combine them in unit
// order. Run is thread-safe: concurrent callers share the threads.

#ifndef GAPTRAIN_SERVICES_ENGINE_HELPING_POOL_H_
#define GAPTRAIN_SERVICES_ENGINE_HELPING_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace gaptrain {

class HelpingPool {
 public:
  // The process's pool. Its threads are started on first need, as many as
  // the largest `helpers` any caller has asked for, and live until exit.
  static HelpingPool* Shared();

  HelpingPool() = default;
  ~HelpingPool();  // joins the threads; no Run may be in progress
  HelpingPool(const HelpingPool&) = delete;
  HelpingPool& operator=(const HelpingPool&) = delete;

  // Calls fn(i) for each i in [0, n) on this thread and up to `helpers`
  // pool threads; returns when every call has returned.
  void Run(size_t n, int helpers, const std::function<void(size_t)>& fn);

  // Threads started so far.
  int num_threads() const;

 private:
  struct Job {
    const std::function<void(size_t)>* fn;
    size_t n;
    std::atomic<size_t> next{0};
    int open_seats;  // helpers that may still join (guarded by mu_)
    int active = 0;  // helpers inside Drain (guarded by mu_)
  };

  static void Drain(Job* job);
  void StartThreadsLocked(int count);
  Job* JobWantingHelpLocked() const;
  void HelperLoop();

  mutable std::mutex mu_;
  std::condition_variable work_;  // a job was posted, or stopping_
  std::condition_variable idle_;  // a helper left a job
  std::vector<Job*> jobs_;        // jobs still running on their callers
  std::vector<std::thread> threads_;
  bool stopping_ = false;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_ENGINE_HELPING_POOL_H_
