#include "operator/kube/reflector.h"

#include <utility>

namespace gaptrain {
namespace kube {

namespace {
// A watch that ends sooner than this without events is a failure, not a
// normal end: resuming at once would spin.
constexpr std::chrono::seconds kShortestNormalWatch{1};
}  // namespace

Reflector::Reflector(Client* client, const Resource& resource, std::string ns,
                     const Options& options, ReflectorHandler* handler)
    : client_(client),
      resource_(resource),
      ns_(std::move(ns)),
      options_(options),
      handler_(handler),
      backoff_(options.backoff, options.backoff_seed) {}

void Reflector::Stop() {
  stop_.Cancel();
  std::lock_guard<std::mutex> lock(mu_);
  stopped_.notify_all();
}

std::string Reflector::resource_version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return resource_version_;
}

bool Reflector::has_synced() const {
  std::lock_guard<std::mutex> lock(mu_);
  return synced_;
}

Reflector::Stats Reflector::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void Reflector::SetResourceVersion(const std::string& rv) {
  std::lock_guard<std::mutex> lock(mu_);
  resource_version_ = rv;
}

void Reflector::Failed(const Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.failures;
  stats_.last_error = status;
}

void Reflector::WaitBackoff() {
  const std::chrono::milliseconds delay = backoff_.Next();
  std::unique_lock<std::mutex> lock(mu_);
  stats_.last_backoff = delay;
  stopped_.wait_for(lock, delay, [this] { return stop_.cancelled(); });
}

void Reflector::Run() {
  bool need_list = true;
  while (!stop_.cancelled()) {
    if (need_list) {
      if (!ListAll()) {
        if (stop_.cancelled()) break;
        WaitBackoff();
        continue;
      }
      need_list = false;
    }
    switch (WatchOnce()) {
      case WatchEnd::kResume: break;
      case WatchEnd::kRelist: need_list = true; break;
      case WatchEnd::kFailed:
        if (!stop_.cancelled()) WaitBackoff();
        break;
    }
  }
}

bool Reflector::ListAll() {
  ListOptions list_options;
  list_options.label_selector = options_.label_selector;
  list_options.field_selector = options_.field_selector;
  list_options.page_size = options_.page_size;
  list_options.cancel = &stop_;
  list_options.transform = options_.transform;
  ObjectList list;
  Status s = client_->List(resource_, ns_, list_options, &list);
  if (!s.ok()) {
    if (!stop_.cancelled()) Failed(s);
    return false;
  }
  backoff_.Reset();
  SetResourceVersion(list.resource_version);
  handler_->OnReplace(std::move(list.items), list.resource_version);
  std::lock_guard<std::mutex> lock(mu_);
  synced_ = true;
  ++stats_.lists;
  return true;
}

Reflector::WatchEnd Reflector::WatchOnce() {
  WatchOptions watch_options;
  watch_options.resource_version = resource_version();
  watch_options.label_selector = options_.label_selector;
  watch_options.field_selector = options_.field_selector;
  watch_options.timeout_seconds = options_.watch_timeout_seconds;
  watch_options.idle_timeout = options_.idle_timeout;
  watch_options.allow_bookmarks = true;
  watch_options.cancel = &stop_;
  const Clock::time_point started = Clock::now();
  std::unique_ptr<WatchStream> stream;
  Status s = client_->Watch(resource_, ns_, watch_options, &stream);
  if (stop_.cancelled()) return WatchEnd::kResume;
  if (IsGone(s)) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.expired;
    return WatchEnd::kRelist;
  }
  if (!s.ok()) {
    Failed(s);
    return WatchEnd::kFailed;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.watches;
  }

  uint64_t delivered = 0;
  WatchEvent event;
  while (stream->Next(&event)) {
    if (event.type == WatchEvent::Type::kError) {
      Status error = WatchErrorStatus("watch " + resource_.RbacName(), event);
      std::lock_guard<std::mutex> lock(mu_);
      if (IsGone(error)) {
        ++stats_.expired;
        return WatchEnd::kRelist;
      }
      ++stats_.failures;
      stats_.last_error = error;
      return WatchEnd::kFailed;  // the lock is released before the wait
    }
    if (options_.transform && event.type != WatchEvent::Type::kBookmark) {
      options_.transform(&event.object);
    }
    switch (event.type) {
      case WatchEvent::Type::kAdded: handler_->OnAdd(event.object); break;
      case WatchEvent::Type::kModified: handler_->OnUpdate(event.object); break;
      case WatchEvent::Type::kDeleted: handler_->OnDelete(event.object); break;
      default: break;  // BOOKMARK: only its resourceVersion matters
    }
    const std::string rv = event.ResourceVersion();
    std::lock_guard<std::mutex> lock(mu_);
    if (!rv.empty()) resource_version_ = rv;
    ++stats_.events;
    ++delivered;
    backoff_.Reset();
  }

  const Status& end = stream->status();
  if (stop_.cancelled()) return WatchEnd::kResume;
  if (end.code() == Status::Code::kDeadlineExceeded) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.idle_timeouts;
    return WatchEnd::kResume;
  }
  if (!end.ok()) {
    Failed(end);
    return WatchEnd::kFailed;
  }
  if (delivered == 0 && Clock::now() - started < kShortestNormalWatch) {
    Failed(Status::Unavailable("watch " + resource_.RbacName() +
                               ": the server ended the watch at once without events"));
    return WatchEnd::kFailed;
  }
  return WatchEnd::kResume;
}

}  // namespace kube
}  // namespace gaptrain
