#include "services/engine/helping_pool.h"

#include <algorithm>

namespace gaptrain {

HelpingPool* HelpingPool::Shared() {
  // Never destroyed: helpers may be parked on it while static destructors
  // run at exit.
  static HelpingPool* pool = new HelpingPool();
  return pool;
}

HelpingPool::~HelpingPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_.notify_all();
  for (std::thread& t : threads_) t.join();
}

int HelpingPool::num_threads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(threads_.size());
}

void HelpingPool::Drain(Job* job) {
  for (size_t i = job->next.fetch_add(1); i < job->n; i = job->next.fetch_add(1)) {
    (*job->fn)(i);
  }
}

void HelpingPool::Run(size_t n, int helpers, const std::function<void(size_t)>& fn) {
  helpers = static_cast<int>(std::min<size_t>(std::max(helpers, 0), n > 0 ? n - 1 : 0));
  if (helpers == 0) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  Job job;
  job.fn = &fn;
  job.n = n;
  job.open_seats = helpers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (static_cast<int>(threads_.size()) < helpers) {
      StartThreadsLocked(helpers - static_cast<int>(threads_.size()));
    }
    jobs_.push_back(&job);
  }
  if (helpers == 1) {
    work_.notify_one();
  } else {
    work_.notify_all();
  }
  Drain(&job);
  // Every unit is claimed. Close the job so no late helper joins, then
  // wait only for helpers still inside one.
  std::unique_lock<std::mutex> lock(mu_);
  jobs_.erase(std::find(jobs_.begin(), jobs_.end(), &job));
  idle_.wait(lock, [&] { return job.active == 0; });
}

void HelpingPool::StartThreadsLocked(int count) {
  for (int i = 0; i < count; ++i) threads_.emplace_back([this] { HelperLoop(); });
}

HelpingPool::Job* HelpingPool::JobWantingHelpLocked() const {
  for (Job* job : jobs_) {
    if (job->open_seats > 0 && job->next.load(std::memory_order_relaxed) < job->n) return job;
  }
  return nullptr;
}

void HelpingPool::HelperLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    Job* job = nullptr;
    work_.wait(lock, [&] { return stopping_ || (job = JobWantingHelpLocked()) != nullptr; });
    if (stopping_) return;
    --job->open_seats;
    ++job->active;
    lock.unlock();
    Drain(job);
    lock.lock();
    if (--job->active == 0) idle_.notify_all();
  }
}

}  // namespace gaptrain
