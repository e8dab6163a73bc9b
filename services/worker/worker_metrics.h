// WorkerMetrics: what gaptrain-worker exports on /metrics (docs/metrics.md,
// "Worker"): the step time split into pull, compute and push; samples
// trained and their rate; the last training loss; reconnections to the
// master and the coordinator; pushes the master refused; the device the
// model computes on; and, on the evaluator, the last test accuracy and
// loss.
//
// Thread-safe: prometheus-cpp metrics are atomic, and the rate's window is
// guarded here.

#ifndef GAPTRAIN_SERVICES_WORKER_WORKER_METRICS_H_
#define GAPTRAIN_SERVICES_WORKER_WORKER_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace gaptrain {

// The services a worker talks to, for the reconnect counter.
enum class Peer { kMaster, kCoordinator };

class WorkerMetrics {
 public:
  using Clock = std::chrono::steady_clock;

  explicit WorkerMetrics(std::shared_ptr<prometheus::Registry> registry);

  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

  void RecordPull(double seconds) { pull_seconds_->Observe(seconds); }
  void RecordCompute(double seconds) { compute_seconds_->Observe(seconds); }
  void RecordPush(double seconds) { push_seconds_->Observe(seconds); }
  // A batch of `samples` whose push succeeded, with its training loss.
  // Samples per second is the rate over the last few seconds.
  void RecordBatch(uint64_t samples, float loss, Clock::time_point now = Clock::now());
  // A call succeeded after one or more failures: the worker reconnected.
  void RecordReconnect(Peer peer);
  // A push the master refused; `code` is the status code's name in lower
  // case ("failed_precondition").
  void RecordPushRejected(const std::string& code);
  void SetMasterVersion(uint64_t version) { master_version_->Set(static_cast<double>(version)); }
  void RecordEvaluation(double accuracy, double loss, uint64_t version, double seconds);
  // gaptrain_worker_device_info{device="cuda:0"} 1: where the model
  // computes ("cpu", "cuda:0"); one series, replaced when it changes.
  void SetDevice(const std::string& device);

  // For tests and logs.
  double samples_total() const { return samples_->Value(); }
  double reconnects(Peer peer) const;
  std::string device() const;  // "" before SetDevice

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Histogram* pull_seconds_;
  prometheus::Histogram* compute_seconds_;
  prometheus::Histogram* push_seconds_;
  prometheus::Counter* samples_;
  prometheus::Gauge* samples_per_second_;
  prometheus::Gauge* loss_;
  prometheus::Counter* master_reconnects_;
  prometheus::Counter* coordinator_reconnects_;
  prometheus::Family<prometheus::Counter>* rejected_family_;
  prometheus::Gauge* master_version_;
  prometheus::Gauge* eval_accuracy_;
  prometheus::Gauge* eval_loss_;
  prometheus::Gauge* eval_version_;
  prometheus::Histogram* eval_seconds_;
  prometheus::Family<prometheus::Gauge>* device_family_;

  mutable std::mutex device_mu_;  // the device series
  prometheus::Gauge* device_gauge_ = nullptr;
  std::string device_;

  std::mutex mu_;  // the rate's window
  Clock::time_point window_start_;
  uint64_t window_samples_ = 0;
  bool window_started_ = false;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_WORKER_WORKER_METRICS_H_
