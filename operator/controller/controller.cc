#include "operator/controller/controller.h"

#include <algorithm>
#include <exception>
#include <utility>

namespace gaptrain {
namespace controller {

Result Result::RequeueAfter(Clock::Duration delay) {
  Result result;
  result.requeue_after = delay;
  return result;
}

Result Result::Error(Status status, std::string reason) {
  Result result;
  result.status = std::move(status);
  result.error_reason = std::move(reason);
  return result;
}

Status Controller::New(const Options& options, ReconcileFunction reconcile,
                       std::unique_ptr<Controller>* controller) {
  if (options.name.empty()) return Status::InvalidArgument("controller name: must not be empty");
  const std::string what = "controller " + options.name + ": ";
  if (!reconcile) return Status::InvalidArgument(what + "reconcile function: must be set");
  if (options.workers < 1) {
    return Status::InvalidArgument(what + "workers: must be >= 1, got " +
                                   std::to_string(options.workers));
  }
  if (options.sync_timeout.count() <= 0) {
    return Status::InvalidArgument(what + "sync_timeout: must be > 0");
  }
  Status s = WorkQueue::Validate(options.queue);
  if (!s.ok()) return Status(s.code(), what + s.message());
  controller->reset(new Controller(options, std::move(reconcile)));
  return Status::OK();
}

Controller::Controller(const Options& options, ReconcileFunction reconcile)
    : options_(options),
      reconcile_(std::move(reconcile)),
      clock_(options.queue.clock),
      queue_(options.queue) {}

Controller::~Controller() { Stop(); }

Status Controller::Watch(Informer* informer, KeyMapper mapper, UpdateFilter filter) {
  std::lock_guard<std::mutex> lock(mu_);
  if (started_ || stopping_) {
    return Status::FailedPrecondition("controller " + options_.name +
                                      ": Watch() must come before Start()");
  }
  EventHandlers handlers = EnqueueHandlers(&queue_, std::move(mapper), std::move(filter));
  handlers.on_synced = [this] {
    std::lock_guard<std::mutex> lock(mu_);
    ++synced_;
    changed_.notify_all();
  };
  GAPTRAIN_RETURN_IF_ERROR(informer->AddEventHandlers(std::move(handlers)));
  informers_.push_back(informer);
  return Status::OK();
}

Status Controller::Start() {
  std::unique_lock<std::mutex> lock(mu_);
  const std::string what = "controller " + options_.name + ": ";
  if (started_) return Status::FailedPrecondition(what + "already started");
  const auto deadline = std::chrono::steady_clock::now() + options_.sync_timeout;
  const bool ready = changed_.wait_until(
      lock, deadline, [this] { return stopping_ || synced_ >= informers_.size(); });
  if (stopping_) return Status(Status::Code::kCancelled, what + "stopped before it started");
  if (!ready) {
    std::string lagging;
    for (const Informer* informer : informers_) {
      if (!informer->HasSynced()) {
        lagging = informer->resource().RbacName() + " in '" + informer->watched_namespace() + "'";
        break;
      }
    }
    return Status(Status::Code::kDeadlineExceeded,
                  what + "the informer for " + lagging + " did not sync within " +
                      std::to_string(options_.sync_timeout.count()) + " ms");
  }
  started_ = true;
  for (int i = 0; i < options_.workers; ++i) workers_.emplace_back([this] { Work(); });
  return Status::OK();
}

void Controller::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    changed_.notify_all();
  }
  queue_.ShutDownWithDrain();
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    workers.swap(workers_);
  }
  for (std::thread& worker : workers) worker.join();
}

Controller::Stats Controller::stats() {
  const size_t depth = queue_.Len();
  std::lock_guard<std::mutex> lock(mu_);
  Stats stats = stats_;
  stats.queue_depth = depth;
  return stats;
}

Result Controller::ReconcileGuarded(const std::string& key) {
  // One object's bad state must not take the whole operator down.
  try {
    return reconcile_(key);
  } catch (const std::exception& e) {
    return Result::Error(Status::Internal("reconcile " + key + " threw: " + e.what()), "Exception");
  } catch (...) {
    return Result::Error(Status::Internal("reconcile " + key + " threw"), "Exception");
  }
}

void Controller::Work() {
  std::string key;
  while (queue_.Get(&key)) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.in_flight;
    }
    const Clock::TimePoint start = clock_->Now();
    const Result result = ReconcileGuarded(key);
    ReconcileRecord record;
    record.key = key;
    record.status = result.status;
    record.duration = clock_->Now() - start;
    if (!result.status.ok()) {
      record.reason =
          result.error_reason.empty() ? StatusCodeName(result.status.code()) : result.error_reason;
      queue_.AddRateLimited(key);
    } else {
      queue_.Forget(key);
      record.requeue_after = result.requeue_after;
      if (result.requeue_after) queue_.AddAfter(key, *result.requeue_after);
    }
    Record(record);
    queue_.Done(key);
  }
}

void Controller::Record(const ReconcileRecord& record) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    --stats_.in_flight;
    ++stats_.reconciles;
    if (!record.status.ok()) {
      ++stats_.errors;
      ++stats_.errors_by_reason[record.reason];
    } else if (record.requeue_after) {
      ++stats_.requeues_after;
    }
    stats_.total_duration += record.duration;
    stats_.max_duration = std::max(stats_.max_duration, record.duration);
  }
  if (options_.observer != nullptr) options_.observer->OnReconciled(options_.name, record);
}

}  // namespace controller
}  // namespace gaptrain
