#include "services/master/master_process.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "services/base/os_error.h"
#include "services/engine/job_config.h"
#include "services/learn/job_data.h"
#include "services/learn/job_model.h"
#include "services/master/bulk_transfer.h"
#include "services/net/grpc_server.h"
#include "services/net/service_endpoints.h"

namespace gaptrain {

namespace {

// The job's model as a trainer would declare it: its layout, initial
// parameters and buffers.
DeclaredModel DeclarationOf(const Model& model) {
  DeclaredModel d;
  d.layout = model.layout();
  d.shard = ParameterShard{0, 1, 0, model.layout().size()};
  d.values.assign(model.parameters(), model.parameters() + model.layout().size());
  d.buffer_layout = model.buffer_layout();
  d.buffer_values.assign(model.buffer_layout().bytes(), '\0');
  model.CopyBuffersTo(reinterpret_cast<uint8_t*>(d.buffer_values.data()));
  return d;
}

// --listen with its port replaced by `port` (the one the first server bound).
ServerFlags OnPort(ServerFlags flags, int port) {
  flags.listen = flags.listen.substr(0, flags.listen.rfind(':') + 1) + std::to_string(port);
  return flags;
}

}  // namespace

Status MasterProcess::Start(const MasterOptions& options, const TrainingJob& job,
                            std::unique_ptr<MasterProcess>* process) {
  std::unique_ptr<MasterProcess> p(new MasterProcess());
  p->job_ = job;
  p->options_ = options;
  const uint32_t shards = job.master.shards;
  if (options.shard >= shards) {
    return Status::InvalidArgument("--shard " + std::to_string(options.shard) +
                                   ": the job has spec.master.shards " +
                                   std::to_string(shards) + " (shards 0 to " +
                                   std::to_string(shards - 1) + ")");
  }
  const uint32_t shard = static_cast<uint32_t>(options.shard);

  DatasetShape train;
  GAPTRAIN_RETURN_IF_ERROR(
      DescribeJobTrainingSet(job, options.train_samples, "the master", &train));
  const uint64_t samples = train.samples;
  GAPTRAIN_RETURN_IF_ERROR(CheckJobAgainstData(job, samples));
  // The job's model, unless the trainers declare it.
  std::optional<DeclaredModel> job_model;
  if (!job.model.from_trainer) {
    std::unique_ptr<Model> model;
    GAPTRAIN_RETURN_IF_ERROR(
        CreateJobModel(job, ModelInputOf(train), options.model_seed, &model));
    job_model = DeclarationOf(*model);
    GAPTRAIN_RETURN_IF_ERROR(KeepShard(shard, shards, &*job_model));
  }

  UpdateEngine::Options& engine_options = p->engine_options_;
  GAPTRAIN_RETURN_IF_ERROR(RuleConfigFromJob(job, &engine_options.rule));
  const bool sync = engine_options.rule.kind == RuleKind::kSync;
  const double per_step =
      sync ? std::max<uint32_t>(1, job.workers.replicas - job.training.sync.backup_workers) : 1;
  const double updates_per_epoch =
      static_cast<double>(samples) / (job.training.batch_size * per_step);
  engine_options.schedule = ScheduleFromJob(job, updates_per_epoch, job.workers.replicas);
  engine_options.max_updates = job.training.max_updates;

  // Resume from the newest valid checkpoint, or start from the model.
  // Each shard is a master of its own: its checkpoints and push ledger.
  std::string dir =
      options.checkpoint_dir.empty() ? job.master.checkpoint.path : options.checkpoint_dir;
  if (shards > 1) dir += "/shard-" + std::to_string(shard);
  p->checkpoints_ = std::make_unique<CheckpointDirectory>(dir, job.master.checkpoint.keep);
  Restored restored;
  std::vector<std::string> skipped;
  Status r = p->checkpoints_->RestoreNewest(&restored.store, &restored.meta, &restored.path,
                                            &skipped);
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
  proto::MasterIncarnation& incarnation = p->incarnation_;
  incarnation.set_id(
      std::max({clock_us, previous_run + 1, (r.ok() ? restored.meta.incarnation : 0) + 1}));
  if (r.ok()) {
    incarnation.set_restored_from_id(restored.meta.incarnation);
    incarnation.set_restored_from_version(restored.store->version());
    const std::string rule = RuleKindName(engine_options.rule.kind);
    if (restored.meta.rule != rule) {
      return Status::FailedPrecondition(
          restored.path + " was written with rule " + restored.meta.rule +
          ", the job now says " + rule + "; move " + dir + " away to start over");
    }
    if (restored.meta.shard.index != shard || restored.meta.shard.count != shards) {
      return Status::FailedPrecondition(
          restored.path + " holds shard " + std::to_string(restored.meta.shard.index) + " of " +
          std::to_string(restored.meta.shard.count) + ", this master is shard " +
          std::to_string(shard) + " of " + std::to_string(shards) + "; move " + dir +
          " away to start over");
    }
    if (job_model.has_value() && restored.store->layout() != job_model->ShardParameters()) {
      return Status::FailedPrecondition(restored.path +
                                        " holds a different model layout than the job's model; "
                                        "move " + dir + " away to start over");
    }
    if (job_model.has_value() && !restored.meta.buffer_values.empty()) {
      const std::string difference = restored.meta.model_buffers.DifferenceFrom(
          job_model->buffer_layout, "in the checkpoint", "in the model");
      if (!difference.empty()) {
        return Status::FailedPrecondition(restored.path + " holds other module buffers than " +
                                          "the job's model (" + difference + "); move " + dir +
                                          " away to start over");
      }
    }
  } else if (r.code() == Status::Code::kNotFound || r.code() == Status::Code::kDataLoss) {
    if (r.code() == Status::Code::kDataLoss) {
      spdlog::error("no valid checkpoint in {}: starting from the initial model", dir);
    }
  } else {
    return r;
  }
  p->registry_ = std::make_shared<prometheus::Registry>();
  MasterProcess* raw = p.get();

  if (r.ok() || job_model.has_value()) {
    GAPTRAIN_RETURN_IF_ERROR(
        p->Serve(r.ok() ? &restored : nullptr, std::move(job_model), options.server));
  } else {
    // spec.model.fromTrainer and nothing to restore: wait for a trainer's
    // declaration, then serve the model it declared on the same port.
    AwaitingModelService::Options awaiting;
    awaiting.job_name = job.name;
    awaiting.token = options.server.token;
    awaiting.rule = RuleKindName(engine_options.rule.kind);
    awaiting.needs_echo = engine_options.rule.NeedsWorkerCopy() &&
                          engine_options.rule.gap_source == GapSource::kEcho;
    awaiting.echo_type = engine_options.rule.gap_precision == GapPrecision::kBfloat16
                             ? proto::BFLOAT16
                             : proto::FLOAT32;
    awaiting.incarnation = incarnation;
    awaiting.shard_index = shard;
    awaiting.shard_count = shards;
    p->awaiting_ = std::make_unique<AwaitingModelService>(awaiting);
    GAPTRAIN_RETURN_IF_ERROR(StartGrpcServer(
        options.server, p->awaiting_.get(),
        [](grpc::ServerBuilder* builder) { ApplyBulkTransferArguments(builder); }, &p->server_,
        &p->grpc_port_));
    spdlog::info("waiting for a trainer to declare the model (spec.model.fromTrainer)");
  }

  ServiceEndpointOptions endpoints;
  endpoints.address = options.server.http_address;
  endpoints.port = options.server.http_port;
  endpoints.registry = p->registry_;
  endpoints.healthy = [raw] {
    std::lock_guard<std::mutex> lock(raw->mu_);
    return !raw->stopping_;
  };
  endpoints.ports_file = options.server.ports_file;
  endpoints.ports_before = {static_cast<uint16_t>(p->grpc_port_)};
  GAPTRAIN_RETURN_IF_ERROR(StartServiceEndpoints(endpoints, &p->http_));
  spdlog::info("master of {} (run {}) serving gRPC on port {}{}, metrics on "
               "http://{}:{}/metrics",
               job.name, incarnation.id(), p->grpc_port_,
               options.server.tls_cert.empty() ? "" : " (TLS)", options.server.http_address,
               p->http_->port());
  p->background_ = std::thread([raw] {
    if (raw->awaiting_ != nullptr && !raw->ServeDeclaredModel()) return;
    raw->BackgroundLoop();
  });
  *process = std::move(p);
  return Status::OK();
}

bool MasterProcess::ServeDeclaredModel() {
  DeclaredModel declared;
  if (!awaiting_->Wait(&declared)) return false;  // stopped first
  // The declaring call's answer goes out before the server stops; clients
  // retry meanwhile, as during a restart.
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  server_.reset();
  const Status s = Serve(nullptr, std::move(declared), OnPort(options_.server, grpc_port_));
  if (!s.ok()) {
    // Nothing can be served: end the process, as a failed start would.
    spdlog::critical("cannot serve the declared model: {}", s.ToString());
    std::_Exit(1);
  }
  return true;
}

Status MasterProcess::Serve(Restored* restored, std::optional<DeclaredModel> fresh,
                            const ServerFlags& server) {
  const UpdateEngine::Options& engine_options = engine_options_;
  const uint64_t restored_unix_ms = restored != nullptr ? restored->meta.created_unix_ms : 0;
  std::unique_ptr<UpdateEngine> engine;
  BufferLayout buffer_layout;
  std::string buffer_values;
  uint64_t buffer_merges = 0;
  if (restored != nullptr) {
    CheckpointMeta& meta = restored->meta;
    shard_ = meta.shard;
    model_layout_ = meta.model_layout;
    model_buffers_ = meta.model_buffers;
    GAPTRAIN_RETURN_IF_ERROR(UpdateEngine::Restore(std::move(restored->store), meta.workers,
                                                   engine_options, &engine));
    std::string ids;
    for (WorkerId w : meta.workers) ids += (ids.empty() ? "" : ", ") + std::to_string(w);
    spdlog::info("restored {} at version {} with {} workers [{}], {} update thread(s)",
                 restored->path, engine->version(), meta.workers.size(), ids,
                 engine_options.rule.num_threads);
    if (!meta.buffer_values.empty()) {
      buffer_layout = meta.buffer_layout;
      buffer_values = std::move(meta.buffer_values);
      buffer_merges = meta.buffer_merges;
    } else if (fresh.has_value() && shard_.index == 0) {
      // A checkpoint from before buffers were kept.
      buffer_layout = fresh->buffer_layout;
      buffer_values = std::move(fresh->buffer_values);
    }
  } else {
    shard_ = fresh->shard;
    model_layout_ = fresh->layout;
    model_buffers_ = fresh->buffer_layout;
    GAPTRAIN_RETURN_IF_ERROR(
        UpdateEngine::Create(fresh->ShardParameters(), engine_options, &engine));
    std::memcpy(engine->mutable_store()->params(), fresh->values.data(),
                fresh->values.size() * sizeof(float));
    if (shard_.index == 0) {  // the module's buffers live on shard 0
      buffer_layout = fresh->buffer_layout;
      buffer_values = std::move(fresh->buffer_values);
    }
    spdlog::info("starting {} from the initial {} model ({} parameters), rule {}, {} update "
                 "thread(s)",
                 job_.name,
                 job_.model.from_trainer      ? std::string("declared")
                 : job_.model.torchscript.empty() ? job_.model.builtin
                                                  : job_.model.torchscript,
                 engine->store().size(), RuleKindName(engine_options.rule.kind),
                 engine_options.rule.num_threads);
  }
  if (shard_.count > 1) {
    spdlog::info("shard {} of {}: parameters [{}, {}) of {}{}", shard_.index, shard_.count,
                 shard_.begin, shard_.end, model_layout_.size(),
                 shard_.index == 0 ? ", and the module's buffers" : "");
  }
  if (ledger_) {
    ledger_->BeginRun(incarnation_.id(), engine->version());
    const PushLedger::Totals t = ledger_->totals();
    if (t.restores > 0) {
      spdlog::info("run {} of the job's master: {} updates lost in restarts so far ({} pushes, "
                   "{} rejected, {} updates in all runs)",
                   t.runs, t.updates_lost, t.pushes, t.rejected, t.updates);
    }
  }
  auto metrics = std::make_shared<MasterMetrics>(registry_, engine->store().layout());
  metrics->SetStart(
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(),
      job_.master.checkpoint.interval_seconds);
  if (restored != nullptr) {
    metrics->RecordRestoredCheckpoint(static_cast<double>(restored_unix_ms) / 1000.0);
  }
  MasterService::Options service_options;
  service_options.job_name = job_.name;
  service_options.token = options_.server.token;
  service_options.incarnation = incarnation_;
  service_options.ledger = ledger_.get();
  service_options.buffers = std::make_shared<ModelBuffers>(
      std::move(buffer_layout), std::move(buffer_values), buffer_merges);
  service_options.shard = shard_;
  service_options.model_layout = model_layout_;
  service_options.model_buffers = model_buffers_;
  auto service = std::make_unique<MasterService>(std::move(engine), service_options, metrics);
  MasterProcess* raw = this;
  service->set_checkpoint_fn(
      [raw](std::string* path, uint64_t* version) { return raw->CheckpointNow(path, version); });
  std::unique_ptr<grpc::Server> grpc_server;
  int port = 0;
  GAPTRAIN_RETURN_IF_ERROR(StartGrpcServer(
      server, service.get(),
      [](grpc::ServerBuilder* builder) { ApplyBulkTransferArguments(builder); }, &grpc_server,
      &port));
  {
    std::lock_guard<std::mutex> lock(mu_);
    metrics_ = std::move(metrics);
    service_ = std::move(service);
    server_ = std::move(grpc_server);
    grpc_port_ = port;
  }
  RefreshJobTotals();
  service_->MarkServing();
  return Status::OK();
}

MasterProcess::~MasterProcess() { Shutdown(); }

Status MasterProcess::CheckpointNow(std::string* path, uint64_t* version) {
  std::lock_guard<std::mutex> one_at_a_time(checkpoint_mu_);
  if (service_ == nullptr) {
    return Status::FailedPrecondition("no model yet: a trainer has not declared it");
  }
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
  meta.shard = shard_;
  meta.model_layout = model_layout_;
  meta.model_buffers = model_buffers_;
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
  if (!ledger_ || !metrics_) return;
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
  if (awaiting_ != nullptr) awaiting_->Stop();
  if (background_.joinable()) background_.join();
  // Finish calls in flight (bounded), then take the final checkpoint.
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  if (service_) CheckpointNow(nullptr, nullptr);
  RefreshJobTotals();
  if (http_) http_->Stop();
}

}  // namespace gaptrain
