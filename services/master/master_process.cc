#include "services/master/master_process.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "services/base/os_error.h"
#include "services/engine/job_config.h"
#include "services/learn/job_data.h"
#include "services/learn/job_model.h"
#include "services/master/bulk_transfer.h"
#include "services/net/grpc_server.h"
#include "services/net/metrics_endpoint.h"
#include "services/net/ports_file.h"

namespace gaptrain {

Status MasterProcess::Start(const MasterOptions& options, const TrainingJob& job,
                            std::unique_ptr<MasterProcess>* process) {
  std::unique_ptr<MasterProcess> p(new MasterProcess());
  p->job_ = job;

  DatasetShape train;
  GAPTRAIN_RETURN_IF_ERROR(
      DescribeJobTrainingSet(job, options.train_samples, "the master", &train));
  const uint64_t samples = train.samples;
  GAPTRAIN_RETURN_IF_ERROR(CheckJobAgainstData(job, samples));
  std::unique_ptr<Model> model;
  GAPTRAIN_RETURN_IF_ERROR(CreateJobModel(job, ModelInputOf(train), options.model_seed, &model));

  UpdateEngine::Options engine_options;
  GAPTRAIN_RETURN_IF_ERROR(RuleConfigFromJob(job, &engine_options.rule));
  const bool sync = engine_options.rule.kind == RuleKind::kSync;
  const double per_step =
      sync ? std::max<uint32_t>(1, job.workers.replicas - job.training.sync.backup_workers) : 1;
  const double updates_per_epoch =
      static_cast<double>(samples) / (job.training.batch_size * per_step);
  engine_options.schedule = ScheduleFromJob(job, updates_per_epoch, job.workers.replicas);

  // Resume from the newest valid checkpoint, or start from the model.
  const std::string dir =
      options.checkpoint_dir.empty() ? job.master.checkpoint.path : options.checkpoint_dir;
  p->checkpoints_ = std::make_unique<CheckpointDirectory>(dir, job.master.checkpoint.keep);
  std::unique_ptr<ParameterStore> restored;
  CheckpointMeta meta;
  std::string restored_path;
  std::vector<std::string> skipped;
  Status r = p->checkpoints_->RestoreNewest(&restored, &meta, &restored_path, &skipped);
  for (const std::string& s : skipped) spdlog::error("skipped invalid checkpoint {}", s);
  // The job's push accounting across runs; a run is numbered after every
  // earlier one it can know of (the ledger's, its checkpoint's) and the
  // clock, so ids grow from run to run.
  const std::string ledger_path = dir + "/" + PushLedger::kFileName;
  Status opened = MakeDirs(dir);
  if (opened.ok()) opened = PushLedger::Open(ledger_path, &p->ledger_);
  if (!opened.ok()) {
    spdlog::error("no push ledger ({}): lost updates are not counted in this run",
                  opened.ToString());
  }
  const uint64_t previous_run = p->ledger_ ? p->ledger_->totals().last_run : 0;
  const uint64_t clock_us = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count());
  proto::MasterIncarnation incarnation;
  incarnation.set_id(std::max({clock_us, previous_run + 1, (r.ok() ? meta.incarnation : 0) + 1}));
  std::unique_ptr<UpdateEngine> engine;
  // The module's buffers: the model's own, or the checkpoint's when it
  // holds them.
  std::string buffer_values(model->buffer_layout().bytes(), '\0');
  model->CopyBuffersTo(reinterpret_cast<uint8_t*>(buffer_values.data()));
  uint64_t buffer_merges = 0;
  if (r.ok()) {
    incarnation.set_restored_from_id(meta.incarnation);
    incarnation.set_restored_from_version(restored->version());
    const std::string rule = RuleKindName(engine_options.rule.kind);
    if (meta.rule != rule) {
      return Status::FailedPrecondition(
          restored_path + " was written with rule " + meta.rule + ", the job now says " + rule +
          "; move " + dir + " away to start over");
    }
    if (restored->layout() != model->layout()) {
      return Status::FailedPrecondition(restored_path +
                                        " holds a different model layout than the job's model; "
                                        "move " + dir + " away to start over");
    }
    if (!meta.buffer_values.empty()) {
      const std::string difference = meta.buffer_layout.DifferenceFrom(
          model->buffer_layout(), "in the checkpoint", "in the model");
      if (!difference.empty()) {
        return Status::FailedPrecondition(restored_path + " holds other module buffers than " +
                                          "the job's model (" + difference + "); move " + dir +
                                          " away to start over");
      }
      buffer_values = std::move(meta.buffer_values);
      buffer_merges = meta.buffer_merges;
    }
    GAPTRAIN_RETURN_IF_ERROR(
        UpdateEngine::Restore(std::move(restored), meta.workers, engine_options, &engine));
    std::string ids;
    for (WorkerId w : meta.workers) ids += (ids.empty() ? "" : ", ") + std::to_string(w);
    spdlog::info("restored {} at version {} with {} workers [{}], {} update thread(s)",
                 restored_path, engine->version(), meta.workers.size(), ids,
                 engine_options.rule.num_threads);
  } else if (r.code() == Status::Code::kNotFound || r.code() == Status::Code::kDataLoss) {
    if (r.code() == Status::Code::kDataLoss) {
      spdlog::error("no valid checkpoint in {}: starting from the initial model", dir);
    }
    GAPTRAIN_RETURN_IF_ERROR(UpdateEngine::Create(model->layout(), engine_options, &engine));
    std::memcpy(engine->mutable_store()->params(), model->parameters(),
                model->layout().size() * sizeof(float));
    spdlog::info(
        "starting {} from the initial {} model ({} parameters), rule {}, {} update "
        "thread(s)",
        job.name, job.model.torchscript.empty() ? job.model.builtin : job.model.torchscript,
        model->layout().size(), RuleKindName(engine_options.rule.kind),
        engine_options.rule.num_threads);
  } else {
    return r;
  }
  const BufferLayout model_buffer_layout = model->buffer_layout();
  model.reset();
  if (p->ledger_) {
    p->ledger_->BeginRun(incarnation.id(), engine->version());
    const PushLedger::Totals t = p->ledger_->totals();
    if (t.restores > 0) {
      spdlog::info("run {} of the job's master: {} updates lost in restarts so far ({} pushes, "
                   "{} rejected, {} updates in all runs)",
                   t.runs, t.updates_lost, t.pushes, t.rejected, t.updates);
    }
  }
  p->incarnation_ = incarnation;

  p->metrics_ = std::make_shared<MasterMetrics>(std::make_shared<prometheus::Registry>(),
                                                engine->store().layout());
  p->metrics_->SetStart(
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(),
      job.master.checkpoint.interval_seconds);
  if (r.ok()) p->metrics_->RecordRestoredCheckpoint(static_cast<double>(meta.created_unix_ms) / 1000.0);
  MasterService::Options service_options;
  service_options.job_name = job.name;
  service_options.token = options.server.token;
  service_options.incarnation = incarnation;
  service_options.ledger = p->ledger_.get();
  service_options.buffers = std::make_shared<ModelBuffers>(
      model_buffer_layout, std::move(buffer_values), buffer_merges);
  const uint64_t restored_version = engine->version();
  p->service_ = std::make_unique<MasterService>(std::move(engine), service_options, p->metrics_);
  p->RefreshJobTotals();
  MasterProcess* raw = p.get();
  p->service_->set_checkpoint_fn(
      [raw](std::string* path, uint64_t* version) { return raw->CheckpointNow(path, version); });

  GAPTRAIN_RETURN_IF_ERROR(StartGrpcServer(
      options.server, p->service_.get(),
      [](grpc::ServerBuilder* builder) { ApplyBulkTransferArguments(builder); }, &p->server_,
      &p->grpc_port_));
  p->service_->MarkServing();

  GAPTRAIN_RETURN_IF_ERROR(
      HttpServer::Start(options.server.http_address, options.server.http_port, &p->http_));
  ServeMetrics(p->http_.get(), p->metrics_->registry());
  ServeHealth(p->http_.get(), [raw] {
    std::lock_guard<std::mutex> lock(raw->mu_);
    return !raw->stopping_;
  });

  if (!options.server.ports_file.empty()) {
    GAPTRAIN_RETURN_IF_ERROR(WritePortsFile(
        options.server.ports_file, {static_cast<uint16_t>(p->grpc_port_), p->http_->port()}));
  }
  spdlog::info("master of {} (run {}, version {}) serving gRPC on port {}{}, metrics on "
               "http://{}:{}/metrics",
               job.name, incarnation.id(), restored_version, p->grpc_port_,
               options.server.tls_cert.empty() ? "" : " (TLS)", options.server.http_address,
               p->http_->port());
  p->background_ = std::thread([raw] { raw->BackgroundLoop(); });
  *process = std::move(p);
  return Status::OK();
}

MasterProcess::~MasterProcess() { Shutdown(); }

Status MasterProcess::CheckpointNow(std::string* path, uint64_t* version) {
  std::lock_guard<std::mutex> one_at_a_time(checkpoint_mu_);
  const auto start = std::chrono::steady_clock::now();
  // Copy under the engine's mutex (a memcpy per buffer), write without it,
  // so pushes keep flowing while the file is written.
  std::unique_ptr<ParameterStore> copy;
  CheckpointMeta meta;
  service_->WithEngine([&](UpdateEngine* engine) {
    copy = engine->store().Clone();
    meta.workers = engine->members();
    meta.rule = RuleKindName(engine->rule_config().kind);
  });
  meta.buffer_layout = service_->buffers()->layout();
  service_->buffers()->Read(&meta.buffer_values, &meta.buffer_merges);
  meta.job_name = job_.name;
  meta.incarnation = incarnation_.id();
  meta.created_unix_ms = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count());
  std::string written;
  Status s = checkpoints_->Save(*copy, meta, &written);
  if (!s.ok() && written.empty()) {
    metrics_->RecordCheckpointFailure();
    spdlog::error("checkpoint failed: {}", s.ToString());
    return s;
  }
  if (!s.ok()) spdlog::warn("checkpoint written, but pruning old ones failed: {}", s.ToString());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  metrics_->RecordCheckpoint(static_cast<double>(meta.created_unix_ms) / 1000.0, seconds);
  service_->SetDurableVersion(copy->version());
  spdlog::info("checkpoint {} written (version {}, {:.2f} s)", written, copy->version(), seconds);
  if (path != nullptr) *path = written;
  if (version != nullptr) *version = copy->version();
  return Status::OK();
}

void MasterProcess::RefreshJobTotals() {
  if (!ledger_) return;
  const PushLedger::Totals t = ledger_->totals();
  metrics_->SetJobTotals(t.pushes, t.rejected, t.updates, t.updates_lost, t.restores);
}

void MasterProcess::BackgroundLoop() {
  using Clock = std::chrono::steady_clock;
  const auto interval = std::chrono::seconds(job_.master.checkpoint.interval_seconds);
  const auto summary_every = std::chrono::seconds(30);
  auto next_checkpoint = Clock::now() + interval;
  auto next_summary = Clock::now() + summary_every;
  const auto totals_every = std::chrono::seconds(1);
  auto next_totals = Clock::now() + totals_every;
  uint64_t last_version = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    wake_.wait_until(lock, std::min({next_checkpoint, next_summary, next_totals}),
                     [this] { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    const auto now = Clock::now();
    if (now >= next_totals) {
      RefreshJobTotals();
      next_totals = now + totals_every;
    }
    if (now >= next_checkpoint) {
      CheckpointNow(nullptr, nullptr);
      next_checkpoint = Clock::now() + interval;
    }
    if (now >= next_summary) {
      uint64_t version = 0;
      size_t workers = 0;
      double lr = 0;
      service_->WithEngine([&](UpdateEngine* e) {
        version = e->version();
        workers = e->num_workers();
        lr = e->learning_rate();
      });
      spdlog::info("summary: version {} (+{} in {} s), {} workers, learning rate {}", version,
                   version - last_version, summary_every.count(), workers, lr);
      last_version = version;
      next_summary = now + summary_every;
    }
    lock.lock();
  }
}

void MasterProcess::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) return;
    shut_down_ = true;
    stopping_ = true;
  }
  wake_.notify_all();
  if (background_.joinable()) background_.join();
  // Finish calls in flight (bounded), then take the final checkpoint.
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  if (service_) CheckpointNow(nullptr, nullptr);
  RefreshJobTotals();
  if (http_) http_->Stop();
}

}  // namespace gaptrain
