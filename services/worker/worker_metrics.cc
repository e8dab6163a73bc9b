#include "services/worker/worker_metrics.h"

#include <cmath>
#include <limits>

namespace gaptrain {
namespace {

// The samples-per-second gauge is recomputed once this much time has
// passed: a scrape sees the recent rate, not one batch's noise.
constexpr double kRateWindowSeconds = 2.0;

const prometheus::Histogram::BucketBoundaries& StepBuckets() {
  static const prometheus::Histogram::BucketBoundaries buckets = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
      0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
  return buckets;
}

prometheus::Gauge* Gauge(prometheus::Registry& r, const std::string& name,
                         const std::string& help) {
  return &prometheus::BuildGauge().Name(name).Help(help).Register(r).Add({});
}

}  // namespace

WorkerMetrics::WorkerMetrics(std::shared_ptr<prometheus::Registry> registry)
    : registry_(std::move(registry)) {
  prometheus::Registry& r = *registry_;
  auto& steps = prometheus::BuildHistogram()
                    .Name("gaptrain_worker_step_duration_seconds")
                    .Help(
                        "Time of each phase of a training step: pull (parameters from the "
                        "master), compute (batch, forward, backward), push (the gradient).")
                    .Register(r);
  pull_seconds_ = &steps.Add({{"phase", "pull"}}, StepBuckets());
  compute_seconds_ = &steps.Add({{"phase", "compute"}}, StepBuckets());
  push_seconds_ = &steps.Add({{"phase", "push"}}, StepBuckets());
  samples_ = &prometheus::BuildCounter()
                  .Name("gaptrain_worker_samples_total")
                  .Help("Training samples whose gradient the master accepted.")
                  .Register(r)
                  .Add({});
  samples_per_second_ = Gauge(r, "gaptrain_worker_samples_per_second",
                              "Training samples per second over the last few seconds.");
  loss_ = Gauge(r, "gaptrain_worker_loss", "Mean training loss of the last batch.");
  loss_->Set(std::numeric_limits<double>::quiet_NaN());
  auto& reconnects = prometheus::BuildCounter()
                         .Name("gaptrain_worker_reconnects_total")
                         .Help(
                             "Calls that succeeded after one or more failed ones: the "
                             "worker got its connection back (a restart, a network fault).")
                         .Register(r);
  master_reconnects_ = &reconnects.Add({{"service", "master"}});
  coordinator_reconnects_ = &reconnects.Add({{"service", "coordinator"}});
  rejected_family_ = &prometheus::BuildCounter()
                          .Name("gaptrain_worker_pushes_rejected_total")
                          .Help("Pushes the master refused, by status code.")
                          .Register(r);
  master_version_ =
      Gauge(r, "gaptrain_worker_master_version", "The newest master version this worker pulled.");
  eval_accuracy_ = Gauge(r, "gaptrain_worker_eval_accuracy",
                         "Evaluator: test accuracy of the last evaluated version; NaN before.");
  eval_accuracy_->Set(std::numeric_limits<double>::quiet_NaN());
  eval_loss_ = Gauge(r, "gaptrain_worker_eval_loss",
                     "Evaluator: mean test cross-entropy of the last evaluated version.");
  eval_loss_->Set(std::numeric_limits<double>::quiet_NaN());
  eval_version_ =
      Gauge(r, "gaptrain_worker_eval_version", "Evaluator: the master version evaluated last.");
  eval_seconds_ = &prometheus::BuildHistogram()
                       .Name("gaptrain_worker_eval_duration_seconds")
                       .Help("Evaluator: time of one evaluation (pull and the test set).")
                       .Register(r)
                       .Add({}, prometheus::Histogram::BucketBoundaries{0.1, 0.25, 0.5, 1, 2.5, 5,
                                                                        10, 25, 50, 100});
  device_family_ = &prometheus::BuildGauge()
                        .Name("gaptrain_worker_device_info")
                        .Help("1, labelled with the device the model computes on (cpu, cuda:0).")
                        .Register(r);
}

void WorkerMetrics::SetDevice(const std::string& device) {
  std::lock_guard<std::mutex> lock(device_mu_);
  if (device_gauge_ != nullptr && device == device_) return;
  if (device_gauge_ != nullptr) device_family_->Remove(device_gauge_);
  device_gauge_ = &device_family_->Add({{"device", device}});
  device_gauge_->Set(1);
  device_ = device;
}

std::string WorkerMetrics::device() const {
  std::lock_guard<std::mutex> lock(device_mu_);
  return device_;
}

void WorkerMetrics::RecordBatch(uint64_t samples, float loss, Clock::time_point now) {
  samples_->Increment(static_cast<double>(samples));
  if (std::isfinite(loss)) loss_->Set(loss);
  std::lock_guard<std::mutex> lock(mu_);
  if (!window_started_) {  // the first batch opens the window
    window_started_ = true;
    window_start_ = now;
    window_samples_ = 0;
    return;
  }
  window_samples_ += samples;
  const double seconds = std::chrono::duration<double>(now - window_start_).count();
  if (seconds >= kRateWindowSeconds) {
    samples_per_second_->Set(static_cast<double>(window_samples_) / seconds);
    window_start_ = now;
    window_samples_ = 0;
  }
}

void WorkerMetrics::RecordReconnect(Peer peer) {
  (peer == Peer::kMaster ? master_reconnects_ : coordinator_reconnects_)->Increment();
}

double WorkerMetrics::reconnects(Peer peer) const {
  return (peer == Peer::kMaster ? master_reconnects_ : coordinator_reconnects_)->Value();
}

void WorkerMetrics::RecordPushRejected(const std::string& code) {
  rejected_family_->Add({{"code", code}}).Increment();
}

void WorkerMetrics::RecordEvaluation(double accuracy, double loss, uint64_t version,
                                     double seconds) {
  eval_accuracy_->Set(accuracy);
  eval_loss_->Set(loss);
  eval_version_->Set(static_cast<double>(version));
  eval_seconds_->Observe(seconds);
}

}  // namespace gaptrain
