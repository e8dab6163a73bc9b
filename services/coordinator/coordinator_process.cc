#include "services/coordinator/coordinator_process.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "services/coordinator/coordinator_config.h"
#include "services/coordinator/coordinator_proto.h"
#include "services/coordinator/state_file.h"
#include "services/coordinator/status_json.h"
#include "services/learn/job_data.h"
#include "services/master/master_client.h"
#include "services/net/grpc_server.h"
#include "services/net/service_endpoints.h"
#include "services/net/tls_credentials.h"

namespace gaptrain {
namespace {

constexpr std::chrono::milliseconds kTickPeriod(200);
constexpr uint64_t kTicksPerProgressWrite = 25;  // 5 s
constexpr uint64_t kTicksPerSummary = 150;       // 30 s

Status EnsureDirectory(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST) {
    struct stat st;
    if (::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return Status::OK();
    return Status::FailedPrecondition("--state-dir: " + dir + " is not a directory");
  }
  return Status::Unavailable("--state-dir: cannot create " + dir + ": " + std::strerror(errno));
}

// Seconds that never go backwards (steady) but read like Unix time (the
// wall clock at start), so condition times mean something to people and
// survive a restart roughly, while leases never jump with the wall clock.
CoordinatorService::Clock AnchoredClock() {
  const auto steady_start = std::chrono::steady_clock::now();
  const double unix_start =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  return [steady_start, unix_start] {
    return unix_start +
           std::chrono::duration<double>(std::chrono::steady_clock::now() - steady_start).count();
  };
}

// The saved state when there is one, else a new job.
Status LoadOrCreateState(const CoordinatorConfig& config, const std::string& path, double now,
                         std::unique_ptr<CoordinatorState>* state) {
  proto::CoordinatorSnapshot snapshot;
  Status r = ReadStateFile(path, &snapshot);
  if (r.code() == Status::Code::kNotFound) {
    GAPTRAIN_RETURN_IF_ERROR(CoordinatorState::Create(config, now, state));
    spdlog::info("new job {}: {} samples in tasks of {}, {} tasks per epoch", config.job_name,
                 config.train_samples, config.samples_per_task, (*state)->tasks().num_tasks());
    return Status::OK();
  }
  if (!r.ok()) {
    // Starting over would hand out the epoch's tasks again.
    return Status(r.code(), r.message() + "; move it away to start the job's data over");
  }
  Status s = CoordinatorState::Restore(config, snapshot, now, state);
  if (!s.ok()) return Status(s.code(), path + ": " + s.message());
  const JobStatus st = (*state)->Describe(now);
  spdlog::info("restored {}: {}, epoch {} ({} of {} tasks done, {} in flight), {} workers whose "
               "leases restart now",
               path, JobPhaseName(st.phase), st.epoch, st.tasks_done, st.tasks_total,
               st.tasks_in_flight, st.live_workers);
  return Status::OK();
}

// The membership feed of master shard `shard` of `shards` at `address`.
std::unique_ptr<MembershipFeed> StartMasterFeed(
    uint32_t shard, uint32_t shards, const std::string& address,
    const std::shared_ptr<grpc::ChannelCredentials>& credentials, const std::string& token,
    CoordinatorService* service, CoordinatorMetrics* metrics) {
  MasterClient::Options client_options;
  client_options.token = token;
  client_options.deadline_seconds = 5;
  // Used on the feed's thread only (MasterClient is thread-compatible).
  // Made from a factory: the client makes the channel again while the
  // master is unreachable, so a master back at a new address behind the
  // same name is fed within a second or so of serving.
  auto client = std::make_shared<MasterClient>(
      MasterClient::ChannelFactory(
          [address, credentials] { return CreateMasterChannel(address, credentials); }),
      client_options);
  // The job's error names the shard that is down ("master shard 1
  // (HOST:PORT): ..."); with one master it reads as before.
  const std::string name =
      shards == 1 ? "the master at " + address
                  : "master shard " + std::to_string(shard) + " (" + address + ")";
  // A restarted master knows only the members of its checkpoint: workers
  // that joined since get NOT_FOUND until the set arrives, so it is sent
  // every second, and retried every 0.5 s at most while the master is
  // down (docs/reliability.md: workers push again within 2 s of a
  // restarted master serving).
  MembershipFeed::Options feed_options;
  feed_options.resend = std::chrono::milliseconds(1000);
  feed_options.max_backoff = std::chrono::milliseconds(500);
  return std::make_unique<MembershipFeed>(
      [client, service, shard](const std::vector<WorkerId>& members) {
        proto::SetMembersResponse response;
        Status s = client->SetMembers(members, &response);
        // Every answer says which run of the shard's master this is: a new
        // one that resumed from an older checkpoint lost updates, and the
        // tasks behind them are trained again.
        if (s.ok()) {
          service->ObserveMaster(shard, FromProto(response.incarnation()), response.version(),
                                 response.durable_version());
          service->ObserveMasterTotals(shard, FromProto(response.totals()));
        }
        return s;
      },
      [service, metrics, shard, shards, name](bool reachable, const std::string& error) {
        metrics->RecordMembersUpdate(reachable);
        if (!reachable) spdlog::warn("cannot update {}: {}", name, error);
        service->ReportMasterHealth(shard, reachable, shards == 1 ? error : name + ": " + error);
      },
      feed_options);
}

}  // namespace

Status CoordinatorProcess::Start(const CoordinatorOptions& options, const TrainingJob& job,
                                 std::unique_ptr<CoordinatorProcess>* process) {
  std::unique_ptr<CoordinatorProcess> p(new CoordinatorProcess());

  DatasetShape train;
  GAPTRAIN_RETURN_IF_ERROR(
      DescribeJobTrainingSet(job, options.train_samples, "the coordinator", &train));
  const uint64_t samples = train.samples;
  CoordinatorConfig config;
  GAPTRAIN_RETURN_IF_ERROR(CoordinatorConfigFromJob(job, samples, options.task_batches, &config));
  config.no_worker_timeout_seconds = static_cast<double>(options.no_worker_timeout_seconds);
  config.master_timeout_seconds = static_cast<double>(options.master_timeout_seconds);
  config.master_shards = std::max<uint32_t>(1, static_cast<uint32_t>(options.masters.size()));
  config.master_addresses = options.masters;

  const CoordinatorService::Clock clock = AnchoredClock();
  GAPTRAIN_RETURN_IF_ERROR(EnsureDirectory(options.state_dir));
  const std::string state_path = options.state_dir + "/" + kStateFileName;
  std::unique_ptr<CoordinatorState> state;
  GAPTRAIN_RETURN_IF_ERROR(LoadOrCreateState(config, state_path, clock(), &state));

  p->metrics_ = std::make_shared<CoordinatorMetrics>(std::make_shared<prometheus::Registry>());
  CoordinatorService::Options service_options;
  service_options.token = options.server.token;
  service_options.master_addresses = options.masters;
  p->service_ = std::make_unique<CoordinatorService>(std::move(state), service_options,
                                                     p->metrics_, clock);
  p->service_->set_persist_fn([state_path](const proto::CoordinatorSnapshot& snapshot) {
    return WriteStateFile(state_path, snapshot);
  });
  // Fails the start when the directory is not writable, before anyone
  // relies on it.
  GAPTRAIN_RETURN_IF_ERROR(p->service_->PersistNow(/*force=*/true));

  if (!options.masters.empty()) {
    std::shared_ptr<grpc::ChannelCredentials> credentials;
    GAPTRAIN_RETURN_IF_ERROR(
        ChannelCredentialsFromCa("--master-ca", options.master_ca, &credentials));
    // One feed per master shard, each on its own thread: every shard
    // converges on its own, and one that is down holds up no other.
    const uint32_t shards = static_cast<uint32_t>(options.masters.size());
    for (uint32_t shard = 0; shard < shards; ++shard) {
      p->feeds_.push_back(StartMasterFeed(shard, shards, options.masters[shard], credentials,
                                          options.server.token, p->service_.get(),
                                          p->metrics_.get()));
    }
    std::vector<MembershipFeed*> feeds;
    for (const auto& feed : p->feeds_) feeds.push_back(feed.get());
    p->service_->set_members_fn(
        [feeds](uint64_t generation, const std::vector<WorkerId>& members) {
          for (MembershipFeed* feed : feeds) feed->Offer(generation, members);
        });
    p->service_->PublishMembers();
  } else {
    spdlog::warn("no --master: the master is not told who is live");
  }

  GAPTRAIN_RETURN_IF_ERROR(StartGrpcServer(options.server, p->service_.get(), nullptr,
                                           &p->server_, &p->grpc_port_));

  CoordinatorProcess* raw = p.get();
  CoordinatorService* service = p->service_.get();
  ServiceEndpointOptions endpoints;
  endpoints.address = options.server.http_address;
  endpoints.port = options.server.http_port;
  endpoints.registry = p->metrics_->registry();
  endpoints.healthy = [raw] {
    std::lock_guard<std::mutex> lock(raw->mu_);
    return !raw->stopping_;
  };
  endpoints.add_handlers = [service, token = options.status_token](HttpServer* http) {
    ServeStatus(http, [service] { return service->Describe(); }, token);
  };
  endpoints.ports_file = options.server.ports_file;
  endpoints.ports_before = {static_cast<uint16_t>(p->grpc_port_)};
  GAPTRAIN_RETURN_IF_ERROR(StartServiceEndpoints(endpoints, &p->http_));
  p->ticks_ = std::make_unique<TickTimer>(kTickPeriod, [raw] { raw->OnTick(); });
  p->ticks_->Start();
  spdlog::info("coordinator of {} serving gRPC on port {}{}, status on http://{}:{}/status",
               job.name, p->grpc_port_, options.server.tls_cert.empty() ? "" : " (TLS)",
               options.server.http_address, p->http_->port());
  *process = std::move(p);
  return Status::OK();
}

CoordinatorProcess::~CoordinatorProcess() { Shutdown(); }

void CoordinatorProcess::OnTick() {
  service_->Tick();
  ++tick_count_;
  if (tick_count_ % kTicksPerProgressWrite == 0) service_->PersistNow(/*force=*/false);
  if (tick_count_ % kTicksPerSummary == 0) {
    const JobStatus s = service_->Describe();
    spdlog::info("summary: {} ({}), epoch {}: {} of {} tasks done, {} in flight; {} live workers; "
                 "progress {:.1f}%",
                 JobPhaseName(s.phase), s.condition.reason, s.epoch, s.tasks_done, s.tasks_total,
                 s.tasks_in_flight, s.live_workers, 100 * s.progress);
    if (s.data_unavailable) {
      spdlog::warn("data unavailable since {}: {} tasks handed back, the last by worker {} "
                   "({}): {}",
                   Rfc3339(s.data_unavailable->since), s.data_unavailable->releases,
                   s.data_unavailable->worker, s.data_unavailable->host,
                   s.data_unavailable->message);
    }
  }
}

void CoordinatorProcess::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) return;
    shut_down_ = true;
    stopping_ = true;
  }
  if (ticks_) ticks_->Stop();
  // Finish calls in flight, then write the final state. Every call is a
  // short unary one, so a second is plenty; gRPC waits the whole deadline
  // while a client keeps an idle connection open.
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  for (const auto& feed : feeds_) feed->Stop();
  if (service_) {
    Status s = service_->PersistNow(/*force=*/true);
    if (s.ok()) {
      spdlog::info("state written");
    } else {
      spdlog::error("final state write failed: {}", s.ToString());
    }
  }
  if (http_) http_->Stop();
}

}  // namespace gaptrain
