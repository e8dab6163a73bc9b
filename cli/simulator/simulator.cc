#include "cli/simulator/simulator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <queue>
#include <sstream>

#include "cli/simulator/batch_time.h"
#include "services/autoscale/autoscale_policy.h"
#include "services/engine/job_config.h"
#include "services/engine/rules/dana_slim_worker.h"
#include "services/engine/update_engine.h"
#include "services/learn/batch_loader.h"
#include "services/learn/epoch_order.h"
#include "services/learn/evaluator.h"
#include "services/learn/model.h"
#include "services/numeric/bfloat16.h"

namespace gaptrain {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Minibatches in shuffled epochs, shared by all virtual workers: each event
// takes the next batch, as workers reading one data stream would.
class BatchStream {
 public:
  BatchStream(const Dataset& train, int64_t batch_size, uint64_t seed)
      : train_(train), loader_(train, batch_size), batch_size_(batch_size), seed_(seed) {
    order_ = EpochPermutation(seed_, 0, static_cast<uint32_t>(train.size()));
  }

  // Fills the next batch; returns its sample count (the epoch's last batch
  // may be short).
  size_t Next(float* images, int64_t* labels) {
    if (position_ >= order_.size()) {
      ++epoch_;
      order_ = EpochPermutation(seed_, epoch_, static_cast<uint32_t>(train_.size()));
      position_ = 0;
    }
    size_t count = std::min<size_t>(batch_size_, order_.size() - position_);
    loader_.Fill(order_.data() + position_, count, images, labels);
    position_ += count;
    consumed_ += count;
    return count;
  }

  double epochs_done() const {
    return static_cast<double>(consumed_) / static_cast<double>(train_.size());
  }

 private:
  const Dataset& train_;
  BatchLoader loader_;
  int64_t batch_size_;
  uint64_t seed_;
  uint64_t epoch_ = 0;
  std::vector<uint32_t> order_;
  size_t position_ = 0;
  uint64_t consumed_ = 0;
};

struct VirtualWorker {
  WorkerId id = 0;
  bool live = false;
  uint64_t generation = 0;  // bumps on leave: drops its pending finish
  double slowdown = 1.0;
  std::vector<float> copy;      // θ⁽ⁱ⁾: what it computes its gradient on
  uint64_t version = 0;         // the version `copy` belongs to
  std::vector<float> velocity;  // dana-slim's worker momentum
};

struct Event {
  enum Kind { kFinish, kLeave, kJoin, kDecide };
  double time;
  Kind kind;
  size_t slot;
  uint64_t generation;
  bool operator>(const Event& o) const { return time != o.time ? time > o.time : slot > o.slot; }
};

// Means of staleness, Gap and penalty over the pushes since the last point.
struct PushWindow {
  double staleness = 0, gap = 0, penalty = 0;
  uint64_t pushes = 0, gap_pushes = 0;
  void Add(const ApplyStats& s) {
    staleness += static_cast<double>(s.staleness);
    penalty += s.penalty_mean;
    ++pushes;
    if (s.has_gap) {
      gap += s.gap.gap_mean;
      ++gap_pushes;
    }
  }
};

class Simulation {
 public:
  Simulation(const TrainingJob& job, const SimulationSpec& spec, const SimulationRun& run,
             const SimulationData& data, const ProgressCallback& progress, RunResult* result)
      : job_(job),
        spec_(spec),
        run_(run),
        data_(data),
        progress_(progress),
        result_(result),
        times_(spec.time_shape, spec.mean_batch_time, run.seed) {}

  Status Run(std::vector<float>* final_parameters) {
    Clock::time_point start = Clock::now();
    GAPTRAIN_RETURN_IF_ERROR(Init());
    Status s = sync_ ? RunSync() : RunAsync();
    if (!s.ok()) return s;
    if (result_->points.empty() || result_->points.back().updates != engine_->version()) {
      Evaluate();
    }
    if (final_parameters != nullptr) {
      const float* theta = engine_->store().params();
      final_parameters->assign(theta, theta + p_);
    }
    result_->seconds_total = SecondsSince(start);
    return Status::OK();
  }

 private:
  Status Init() {
    result_->run = run_;
    TrainingJob job = job_;
    if (!run_.autoscale()) job.workers.replicas = run_.workers;
    const uint32_t start_workers = job.workers.replicas;
    if (run_.autoscale() && !KnowsGap(run_.rule)) {
      return Status::InvalidArgument("spec.simulation.autoscale: needs a Gap-Aware rule, got " +
                                     run_.rule);
    }
    job.training.optimizer.learning_rate = run_.learning_rate;
    job.training.optimizer.momentum = run_.momentum;
    sync_ = run_.rule == "sync";
    if (sync_) {
      job.training.mode = "sync";
      job.training.sync.backup_workers = run_.backup_workers;
    } else {
      job.training.mode = "async";
      job.training.staleness.rule = run_.rule;
    }
    // DANA is already look-ahead; a sweep over rules keeps nesterov for the
    // others only. Nesterov needs momentum.
    bool dana =
        run_.rule == "dana-zero" || run_.rule == "dana-slim" || run_.rule == "gap-aware-dana";
    if (dana || run_.momentum == 0) job.training.optimizer.nesterov = false;

    RuleConfig rule;
    GAPTRAIN_RETURN_IF_ERROR(RuleConfigFromJob(job, &rule));
    dana_slim_ = rule.kind == RuleKind::kDanaSlim;
    echo_ = rule.NeedsWorkerCopy() && rule.gap_source == GapSource::kEcho;
    echo_bf16_ = rule.gap_precision == GapPrecision::kBfloat16;
    momentum_ = static_cast<float>(run_.momentum);
    weight_decay_ = static_cast<float>(job.training.optimizer.weight_decay);

    const double samples = static_cast<double>(data_.train.size());
    const double batch = job.training.batch_size;
    const uint32_t per_step = sync_ ? start_workers - run_.backup_workers : 1;
    const double updates_per_epoch = samples / (batch * per_step);
    total_updates_ = TotalUpdates(job, updates_per_epoch);

    ModelInput input{data_.train.channels, data_.train.height, data_.train.width,
                     data_.train.num_classes};
    if (job.model.from_trainer) return Status::FailedPrecondition(kNoModelFromTrainer);
    if (!job.model.torchscript.empty()) {
      GAPTRAIN_RETURN_IF_ERROR(Model::LoadTorchScript(job.model.torchscript, input, &model_));
    } else {
      GAPTRAIN_RETURN_IF_ERROR(Model::CreateBuiltin(job.model.builtin, input, run_.seed, &model_));
    }
    UpdateEngine::Options options{rule, ScheduleFromJob(job, updates_per_epoch, start_workers)};
    GAPTRAIN_RETURN_IF_ERROR(UpdateEngine::Create(model_->layout(), options, &engine_));
    p_ = model_->layout().size();
    std::memcpy(engine_->mutable_store()->params(), model_->parameters(), p_ * sizeof(float));

    stream_ = std::make_unique<BatchStream>(data_.train, job.training.batch_size,
                                            SimulationShuffleSeed(job_, run_));
    const size_t image = data_.train.image_size();
    images_.resize(static_cast<size_t>(job.training.batch_size) * image);
    labels_.resize(job.training.batch_size);
    if (dana_slim_) scratch_.resize(p_);
    if (echo_ && echo_bf16_) echo_buffer_.resize(p_);

    // Workers, their straggler factors, and the preemption schedule. An
    // autoscaled run has a slot for every N it may reach; N of them live.
    workers_spec_ = job.workers;
    wanted_ = start_workers;
    const uint32_t slots = run_.autoscale() ? job.workers.Ceiling() : start_workers;
    workers_.resize(slots);
    const uint32_t slow = static_cast<uint32_t>(std::lround(spec_.straggler_fraction * slots));
    std::vector<uint32_t> order = EpochPermutation(run_.seed, 7919, slots);
    for (uint32_t i = 0; i < slow; ++i) workers_[order[i]].slowdown = spec_.straggler_slowdown;
    for (size_t slot = 0; slot < wanted_; ++slot) {
      GAPTRAIN_RETURN_IF_ERROR(Join(slot, 0.0));
    }
    if (run_.autoscale()) {
      events_.push({job.workers.autoscale.interval_seconds, Event::kDecide, 0, 0});
    }
    for (const ScheduledPreemption& p : spec_.preemptions) {
      if (p.worker < workers_.size()) events_.push({p.at, Event::kLeave, p.worker, 0});
      if (p.worker < workers_.size() && p.rejoin_after > 0) {
        events_.push({p.at + p.rejoin_after, Event::kJoin, p.worker, 0});
      }
    }
    ScheduleRandomPreemption(0.0);
    next_eval_epoch_ = spec_.eval_every_epochs;
    return Status::OK();
  }

  static bool KnowsGap(const std::string& rule) {
    for (const char* r : kGapAwareRules) {
      if (rule == r) return true;
    }
    return false;
  }

  size_t LiveWorkers() const {
    size_t live = 0;
    for (const VirtualWorker& w : workers_) live += w.live;
    return live;
  }

  // Adds worker `slot` (a fresh id) and, in async mode, starts its batch.
  // A replacement arriving after the autoscaler shrank N is not wanted.
  Status Join(size_t slot, double now) {
    VirtualWorker& w = workers_[slot];
    if (w.live || LiveWorkers() >= wanted_) return Status::OK();
    w.id = next_id_++;
    w.live = true;
    ++w.generation;
    GAPTRAIN_RETURN_IF_ERROR(engine_->Join(w.id));
    w.copy.resize(p_);
    if (dana_slim_) w.velocity.assign(p_, 0.0f);
    GAPTRAIN_RETURN_IF_ERROR(engine_->Pull(w.id, w.copy.data(), p_, &w.version));
    if (!sync_) events_.push({now + times_.Draw(w.slowdown), Event::kFinish, slot, w.generation});
    return Status::OK();
  }

  // A preemption, or the autoscaler's shrinking (not a preemption).
  Status Leave(size_t slot, bool preempted = true) {
    VirtualWorker& w = workers_[slot];
    if (!w.live) return Status::OK();
    w.live = false;
    ++w.generation;
    if (preempted) ++result_->preemptions;
    return engine_->Leave(w.id, &stats_);
  }

  // Every intervalSeconds of virtual time: the policy the operator and
  // `gaptrain run` use decides N from what this window measured.
  Status Decide() {
    const AutoscaleSpec& autoscale = workers_spec_.autoscale;
    AutoscaleWindow window;
    window.replicas = wanted_;
    window.running = static_cast<uint32_t>(LiveWorkers());
    window.preemptions = static_cast<uint32_t>(result_->preemptions - scale_window_.preemptions);
    window.seconds = now_ - scale_window_.start;
    window.updates = static_cast<double>(engine_->version() - scale_window_.version);
    window.gap_sum = scale_window_.pushes.gap;
    window.gap_count = static_cast<double>(scale_window_.pushes.gap_pushes);
    const AutoscaleDecision d = DecideTrainers(workers_spec_, window, &scale_memory_);
    if (d.replicas != wanted_) {
      result_->scale_changes.push_back(ScaleChange{now_, wanted_, d.replicas, d.message});
      const uint32_t from = wanted_;
      wanted_ = d.replicas;
      if (wanted_ > from) {
        for (size_t slot = 0; slot < workers_.size() && LiveWorkers() < wanted_; ++slot) {
          GAPTRAIN_RETURN_IF_ERROR(Join(slot, now_));
        }
      } else {
        for (size_t slot = workers_.size(); slot-- > 0 && LiveWorkers() > wanted_;) {
          GAPTRAIN_RETURN_IF_ERROR(Leave(slot, /*preempted=*/false));
        }
      }
    }
    scale_window_ = ScaleWindow{now_, engine_->version(), result_->preemptions, PushWindow()};
    events_.push({now_ + autoscale.interval_seconds, Event::kDecide, 0, 0});
    return Status::OK();
  }

  void ScheduleRandomPreemption(double now) {
    if (spec_.preemption_rate <= 0) return;
    // One global Poisson process at rate · N; the victim is drawn when it fires.
    double rate = spec_.preemption_rate * static_cast<double>(workers_.size());
    events_.push({now - std::log(times_.Uniform()) / rate, Event::kLeave, kRandomSlot, 0});
  }

  Status HandleMembership(const Event& e) {
    if (e.kind == Event::kDecide) return Decide();
    if (e.kind == Event::kJoin) return Join(e.slot, e.time);
    size_t slot = e.slot;
    if (slot == kRandomSlot) {
      ScheduleRandomPreemption(e.time);
      std::vector<size_t> live;
      for (size_t i = 0; i < workers_.size(); ++i) {
        if (workers_[i].live) live.push_back(i);
      }
      if (live.size() <= 1) return Status::OK();  // keep the job alive
      slot = live[static_cast<size_t>(times_.Uniform() * live.size())];
      if (spec_.rejoin_after > 0) {
        events_.push({e.time + spec_.rejoin_after, Event::kJoin, slot, 0});
      }
    }
    return Leave(slot);
  }

  // Forward/backward on the next batch at `params`; false if it diverged.
  bool ComputeGradient(const float* params) {
    Clock::time_point start = Clock::now();
    std::memcpy(model_->parameters(), params, p_ * sizeof(float));
    size_t count = stream_->Next(images_.data(), labels_.data());
    float loss =
        model_->ComputeGradient(images_.data(), labels_.data(), static_cast<int64_t>(count));
    result_->seconds_gradient += SecondsSince(start);
    return std::isfinite(loss);
  }

  // Pushes the gradient in the model (DANA-Slim: u) for worker `w`.
  Status Push(VirtualWorker& w, bool* diverged) {
    PushRequest request;
    request.worker = w.id;
    request.base_version = w.version;
    request.gradient = GradientView(model_->gradients(), p_);
    if (dana_slim_) {
      const float* g = model_->gradients();
      for (size_t j = 0; j < p_; ++j) scratch_[j] = g[j] + weight_decay_ * w.copy[j];
      DanaSlimWorkerStep(momentum_, scratch_.data(), w.velocity.data(), scratch_.data(), p_);
      request.gradient = GradientView(scratch_.data(), p_);
    }
    if (echo_) {
      request.echo_size = p_;
      if (echo_bf16_) {
        FloatsToBf16(w.copy.data(), p_, echo_buffer_.data());
        request.echo = {DType::kBfloat16, echo_buffer_.data()};
      } else {
        request.echo = {DType::kFloat32, w.copy.data()};
      }
    }
    const uint64_t non_finite = engine_->rejected(RejectReason::kNonFinite);
    Status s = engine_->Push(request, &stats_);
    ++result_->pushes;
    if (engine_->rejected(RejectReason::kNonFinite) > non_finite) {
      *diverged = true;  // a finite loss can still overflow its gradient
      return Status::OK();
    }
    GAPTRAIN_RETURN_IF_ERROR(s);
    window_.Add(stats_);
    scale_window_.pushes.Add(stats_);
    return Status::OK();
  }

  Status RunAsync() {
    while (engine_->version() < total_updates_ && !events_.empty()) {
      Event e = events_.top();
      events_.pop();
      now_ = e.time;
      if (e.kind != Event::kFinish) {
        GAPTRAIN_RETURN_IF_ERROR(HandleMembership(e));
        continue;
      }
      VirtualWorker& w = workers_[e.slot];
      if (!w.live || e.generation != w.generation) continue;  // left meanwhile

      bool diverged = !ComputeGradient(w.copy.data());
      Clock::time_point start = Clock::now();
      if (!diverged) GAPTRAIN_RETURN_IF_ERROR(Push(w, &diverged));
      if (diverged) return Diverged();
      GAPTRAIN_RETURN_IF_ERROR(engine_->Pull(w.id, w.copy.data(), p_, &w.version));
      result_->seconds_update += SecondsSince(start);
      events_.push({now_ + times_.Draw(w.slowdown), Event::kFinish, e.slot, w.generation});
      AfterUpdate();
    }
    return Status::OK();
  }

  Status RunSync() {
    std::vector<std::pair<double, size_t>> draws;
    std::vector<float> params(p_);
    while (engine_->version() < total_updates_) {
      // Membership changes take effect between steps.
      while (!events_.empty() && events_.top().time <= now_) {
        Event e = events_.top();
        events_.pop();
        GAPTRAIN_RETURN_IF_ERROR(HandleMembership(e));
      }
      draws.clear();
      for (size_t slot = 0; slot < workers_.size(); ++slot) {
        if (workers_[slot].live) draws.push_back({times_.Draw(workers_[slot].slowdown), slot});
      }
      if (draws.empty()) {
        if (events_.empty()) break;  // nobody left and nobody coming
        now_ = events_.top().time;
        continue;
      }
      const size_t backups = std::min<size_t>(run_.backup_workers, draws.size() - 1);
      const size_t needed = draws.size() - backups;
      std::nth_element(draws.begin(), draws.begin() + (needed - 1), draws.end());
      std::sort(draws.begin(), draws.begin() + needed);
      now_ += draws[needed - 1].first;
      result_->late_gradients += backups;

      const uint64_t step = engine_->version();
      for (size_t k = 0; k < needed && engine_->version() == step; ++k) {
        VirtualWorker& w = workers_[draws[k].second];
        Clock::time_point start = Clock::now();
        GAPTRAIN_RETURN_IF_ERROR(engine_->Pull(w.id, params.data(), p_, &w.version));
        result_->seconds_update += SecondsSince(start);
        bool diverged = !ComputeGradient(params.data());
        start = Clock::now();
        if (!diverged) GAPTRAIN_RETURN_IF_ERROR(Push(w, &diverged));
        result_->seconds_update += SecondsSince(start);
        if (diverged) return Diverged();
      }
      AfterUpdate();
    }
    return Status::OK();
  }

  Status Diverged() {
    result_->diverged = true;
    return Status::OK();
  }

  void AfterUpdate() {
    if (stream_->epochs_done() >= next_eval_epoch_) {
      Evaluate();
      while (next_eval_epoch_ <= stream_->epochs_done())
        next_eval_epoch_ += spec_.eval_every_epochs;
    }
    if (progress_ && (engine_->version() - last_progress_) * 100 >= total_updates_) {
      last_progress_ = engine_->version();
      SimulationProgress p;
      p.fraction = static_cast<double>(engine_->version()) / static_cast<double>(total_updates_);
      p.epoch = stream_->epochs_done();
      p.last_accuracy = result_->points.empty() ? 0 : result_->points.back().accuracy;
      progress_(p);
    }
  }

  void Evaluate() {
    Clock::time_point start = Clock::now();
    std::memcpy(model_->parameters(), engine_->store().params(), p_ * sizeof(float));
    EvalResult eval;
    Status s = EvaluateModel(model_.get(), data_.test, 500, &eval);
    EvalPoint point;
    point.virtual_time = now_;
    point.updates = engine_->version();
    point.epoch = stream_->epochs_done();
    point.accuracy = s.ok() ? eval.accuracy : 0;
    point.loss = s.ok() ? eval.loss : NAN;
    point.live_workers = static_cast<uint32_t>(LiveWorkers());
    if (window_.pushes > 0) {
      point.mean_staleness = window_.staleness / window_.pushes;
      point.mean_penalty = window_.penalty / window_.pushes;
    }
    if (window_.gap_pushes > 0) point.mean_gap = window_.gap / window_.gap_pushes;
    window_ = PushWindow();
    result_->points.push_back(point);
    result_->seconds_eval += SecondsSince(start);
  }

  static constexpr size_t kRandomSlot = static_cast<size_t>(-1);

  const TrainingJob& job_;
  const SimulationSpec& spec_;
  const SimulationRun run_;
  const SimulationData& data_;
  const ProgressCallback& progress_;
  RunResult* result_;

  BatchTimeSampler times_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<UpdateEngine> engine_;
  std::unique_ptr<BatchStream> stream_;
  std::vector<VirtualWorker> workers_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  std::vector<float> images_;
  std::vector<int64_t> labels_;
  std::vector<float> scratch_;
  std::vector<bf16_t> echo_buffer_;
  ApplyStats stats_;
  PushWindow window_;

  // Autoscaled runs: what the policy sees since its last decision.
  struct ScaleWindow {
    double start = 0;
    uint64_t version = 0;
    uint64_t preemptions = 0;
    PushWindow pushes;
  };
  WorkersSpec workers_spec_;
  uint32_t wanted_ = 0;  // N: the workers the run wants live
  ScaleWindow scale_window_;
  AutoscaleMemory scale_memory_;

  bool sync_ = false;
  bool dana_slim_ = false;
  bool echo_ = false;
  bool echo_bf16_ = false;
  float momentum_ = 0;
  float weight_decay_ = 0;
  size_t p_ = 0;
  uint64_t total_updates_ = 0;
  WorkerId next_id_ = 1;
  double now_ = 0;
  double next_eval_epoch_ = 0;
  uint64_t last_progress_ = 0;
};

}  // namespace

std::string SimulationRun::Label() const {
  std::ostringstream s;
  s << rule << " N=" << (autoscale() ? std::string("auto") : std::to_string(workers))
    << " lr=" << learning_rate << " m=" << momentum << " seed=" << seed;
  if (rule == "sync") s << " b=" << backup_workers;
  return s.str();
}

Status LoadSimulationData(const TrainingJob& job, const SimulationSpec& spec,
                          SimulationData* data) {
  DatasetFormat format;
  GAPTRAIN_RETURN_IF_ERROR(ParseDatasetFormat(job.data.format, &format));
  GAPTRAIN_RETURN_IF_ERROR(LoadDataset(format, job.data.path, Split::kTrain, &data->train));
  GAPTRAIN_RETURN_IF_ERROR(CheckJobAgainstData(job, data->train.size()));
  GAPTRAIN_RETURN_IF_ERROR(LoadDataset(format, job.data.path, Split::kTest, &data->test));
  Dataset& test = data->test;
  if (spec.eval_samples > 0 && spec.eval_samples < test.size()) {
    test.images.resize(spec.eval_samples * test.image_size());
    test.labels.resize(spec.eval_samples);
  }
  return Status::OK();
}

uint64_t SimulationShuffleSeed(const TrainingJob& job, const SimulationRun& run) {
  return job.data.shuffle_seed + run.seed;
}

Status RunSimulation(const TrainingJob& job, const SimulationSpec& spec, const SimulationRun& run,
                     const SimulationData& data, const ProgressCallback& progress,
                     RunResult* result, std::vector<float>* final_parameters) {
  *result = RunResult();
  Simulation simulation(job, spec, run, data, progress, result);
  return simulation.Run(final_parameters);
}

}  // namespace gaptrain
