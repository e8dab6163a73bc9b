#include "operator/testing/watch_session.h"

#include <algorithm>
#include <utility>

namespace gaptrain {
namespace kube_testing {

WatchSession::WatchSession(std::unique_ptr<ObjectStore::Watch> watch, bool allow_bookmarks,
                           std::chrono::milliseconds bookmark_interval,
                           std::chrono::milliseconds timeout)
    : watch_(std::move(watch)),
      allow_bookmarks_(allow_bookmarks),
      bookmark_interval_(std::max(bookmark_interval, std::chrono::milliseconds(1))),
      end_(Clock::now() + timeout),
      next_bookmark_(Clock::now() + bookmark_interval_) {}

bool WatchSession::NextLine(const std::function<bool()>& client_gone, std::string* line) {
  if (finished_) return false;
  WatchEvent event;
  for (;;) {
    Clock::time_point wake = std::min(end_, Clock::now() + std::chrono::seconds(1));
    if (allow_bookmarks_) wake = std::min(wake, next_bookmark_);
    switch (watch_->Next(wake, &event)) {
      case ObjectStore::Watch::Result::kEvent:
        *line = event.Encode() + "\n";
        if (event.type == "ERROR") finished_ = true;
        return true;
      case ObjectStore::Watch::Result::kClosed:
        finished_ = true;
        return false;
      case ObjectStore::Watch::Result::kTimeout:
        break;
    }
    const Clock::time_point now = Clock::now();
    if (now >= end_) {
      finished_ = true;
      // kube-apiserver sends a last bookmark as the watch times out.
      if (allow_bookmarks_ && watch_->Bookmark(&event)) {
        *line = event.Encode() + "\n";
        return true;
      }
      return false;
    }
    if (allow_bookmarks_ && now >= next_bookmark_) {
      next_bookmark_ = now + bookmark_interval_;
      if (watch_->Bookmark(&event)) {
        *line = event.Encode() + "\n";
        return true;
      }
    }
    if (client_gone()) {
      finished_ = true;
      return false;
    }
  }
}

}  // namespace kube_testing
}  // namespace gaptrain
