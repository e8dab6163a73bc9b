#include "services/coordinator/tick_timer.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

namespace gaptrain {

class TickTimer::Impl {
 public:
  Impl(std::chrono::milliseconds period, std::function<void()> tick)
      : period_(period), tick_(std::move(tick)), timer_(io_) {}

  void Schedule() {
    timer_.expires_after(period_);
    timer_.async_wait([this](const boost::system::error_code& error) {
      if (error || stopped_) return;  // cancelled by Stop
      tick_();
      Schedule();
    });
  }

  void Run() { io_.run(); }

  // Runs on the io thread, so it never races a tick.
  void StopSoon() {
    boost::asio::post(io_, [this] {
      stopped_ = true;
      timer_.cancel();
    });
  }

 private:
  const std::chrono::milliseconds period_;
  const std::function<void()> tick_;
  boost::asio::io_context io_;
  boost::asio::steady_timer timer_;
  bool stopped_ = false;  // touched on the io thread only
};

TickTimer::TickTimer(std::chrono::milliseconds period, std::function<void()> tick)
    : impl_(std::make_unique<Impl>(period, std::move(tick))) {}

TickTimer::~TickTimer() { Stop(); }

void TickTimer::Start() {
  if (thread_.joinable()) return;
  impl_->Schedule();
  thread_ = std::thread([this] { impl_->Run(); });
}

void TickTimer::Stop() {
  if (!thread_.joinable()) return;
  impl_->StopSoon();
  thread_.join();
}

}  // namespace gaptrain
