// WatchSession: one watch request's response stream, between the store's
// watch and the connection: it yields the lines the server writes (one
// JSON event per line, each sent as its own HTTP chunk), adds BOOKMARK
// events every `bookmark_interval` when the client allowed them and one
// right before the stream ends at timeoutSeconds (as kube-apiserver v1.26
// does), and ends the stream at the timeout, when the store closes the
// watch, or when the client has gone.

#ifndef GAPTRAIN_OPERATOR_TESTING_WATCH_SESSION_H_
#define GAPTRAIN_OPERATOR_TESTING_WATCH_SESSION_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "operator/testing/object_store.h"

namespace gaptrain {
namespace kube_testing {

class WatchSession {
 public:
  WatchSession(std::unique_ptr<ObjectStore::Watch> watch, bool allow_bookmarks,
               std::chrono::milliseconds bookmark_interval, std::chrono::milliseconds timeout);

  // The next line to send ("{...}\n"); false when the stream is over.
  // `client_gone` is polled at least once a second while nothing happens.
  bool NextLine(const std::function<bool()>& client_gone, std::string* line);

 private:
  using Clock = std::chrono::steady_clock;

  std::unique_ptr<ObjectStore::Watch> watch_;
  const bool allow_bookmarks_;
  const std::chrono::milliseconds bookmark_interval_;
  const Clock::time_point end_;
  Clock::time_point next_bookmark_;
  bool finished_ = false;
};

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_WATCH_SESSION_H_
