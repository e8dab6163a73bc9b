#include "services/coordinator/membership_feed.h"

#include <algorithm>

namespace gaptrain {

MembershipFeed::MembershipFeed(SendFn send, HealthFn health, Options options)
    : send_(std::move(send)), health_(std::move(health)), options_(options) {
  thread_ = std::thread([this] { Loop(); });
}

MembershipFeed::~MembershipFeed() { Stop(); }

void MembershipFeed::Offer(uint64_t generation, std::vector<WorkerId> members) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (offered_ && generation < generation_) return;
    offered_ = true;
    generation_ = generation;
    members_ = std::move(members);
  }
  wake_.notify_all();
}

void MembershipFeed::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool MembershipFeed::WaitAcknowledged(uint64_t generation, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return wake_.wait_for(lock, timeout, [&] {
    return acknowledged_any_ && acknowledged_ >= generation;
  });
}

void MembershipFeed::Loop() {
  using Clock = std::chrono::steady_clock;
  auto backoff = options_.initial_backoff;
  Clock::time_point retry_at = Clock::now();     // after a failure
  Clock::time_point resend_at = Clock::time_point::max();
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    const bool pending = offered_ && (!acknowledged_any_ || acknowledged_ != generation_);
    const Clock::time_point due = pending ? retry_at : resend_at;
    if (!offered_ || Clock::now() < due) {
      if (!offered_) {
        wake_.wait(lock);
      } else {
        wake_.wait_until(lock, due);
      }
      continue;
    }
    const uint64_t generation = generation_;
    const std::vector<WorkerId> members = members_;
    lock.unlock();
    const Status s = send_(members);
    if (health_) health_(s.ok(), s.message());
    lock.lock();
    if (s.ok()) {
      acknowledged_any_ = true;
      acknowledged_ = std::max(acknowledged_, generation);
      backoff = options_.initial_backoff;
      retry_at = Clock::now();
      resend_at = Clock::now() + options_.resend;
      wake_.notify_all();  // WaitAcknowledged
    } else {
      retry_at = Clock::now() + backoff;
      resend_at = retry_at;
      backoff = std::min(backoff * 2, options_.max_backoff);
    }
  }
}

}  // namespace gaptrain
