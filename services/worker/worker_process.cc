#include "services/worker/worker_process.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "services/base/available_cpus.h"
#include "services/coordinator/coordinator_client.h"
#include "services/learn/compute_threads.h"
#include "services/learn/dataset.h"
#include "services/learn/device.h"
#include "services/master/master_client.h"
#include "services/net/http_server.h"
#include "services/net/service_endpoints.h"
#include "services/net/tls_credentials.h"
#include "services/worker/coordinator_session.h"
#include "services/worker/evaluation_loop.h"
#include "services/worker/loop_options.h"
#include "services/worker/master_link.h"
#include "services/worker/trainer.h"
#include "services/worker/worker_channel.h"
#include "services/worker/worker_metrics.h"

namespace gaptrain {
namespace {

// Per-call deadlines: a coordinator verb is small; a master call moves the
// model, which on a slow link takes a while for a large one.
constexpr double kCoordinatorDeadlineSeconds = 10;
constexpr double kMasterDeadlineSeconds = 30;

// Capped at 500 ms: after a restart the worker's next attempt comes at
// most that long after the server serves (with 2 s, a trainer waited up to
// 2 s, twice when the master then answered NOT_FOUND until the
// coordinator's member set arrived). An attempt on a channel whose server
// is down fails within the client, so a fleet retrying every 0.25-0.5 s
// costs the servers nothing.
RetryPolicy DefaultRetry() {
  RetryPolicy p;
  p.backoff.initial = std::chrono::milliseconds(100);
  p.backoff.max = std::chrono::milliseconds(500);
  p.backoff.multiplier = 2;
  p.backoff.jitter = 0.5;
  p.max_attempts = 0;  // a network fault never ends a worker
  return p;
}

// ", 2 files from the data cache" and the like; "" without a cache.
std::string DescribeCacheUse(const DatasetCacheUse& use) {
  std::string text;
  if (use.files_from_cache > 0) {
    text += ", " + std::to_string(use.files_from_cache) + " file(s) from the data cache";
  }
  if (use.files_cached > 0) {
    text += ", " + std::to_string(use.files_cached) + " file(s) inflated into the data cache";
  }
  return text;
}

}  // namespace

Status RunWorkerProcess(const WorkerOptions& options, const TrainingJob& job, StopFlag* stop) {
  const int threads = options.threads > 0 ? options.threads : AvailableCpus();
  SetComputeThreads(threads);
  const DeviceChoice device = ChooseDevice(options.device);
  if (!device.note.empty()) spdlog::warn("{}", device.note);

  if (job.data.ReadByTrainers()) {
    return Status::FailedPrecondition(
        "spec.data.format: " + job.data.format +
        " data is read by your own trainer's code (the Python SDK); gaptrain-worker reads "
        "mnist-idx and cifar10-bin files");
  }
  DatasetFormat format;
  GAPTRAIN_RETURN_IF_ERROR(ParseDatasetFormat(job.data.format, &format));
  const std::string dir = options.data_dir.empty() ? job.data.path : options.data_dir;
  const Split split = options.evaluator ? Split::kTest : Split::kTrain;
  Dataset data;
  const auto load_start = std::chrono::steady_clock::now();
  DatasetCacheUse cache_use;
  GAPTRAIN_RETURN_IF_ERROR(LoadDataset(format, dir, split, options.data_cache, &data, &cache_use));
  spdlog::info("{} split of {}: {} samples of {}x{}x{} ({:.2f} s{}); {} compute threads, device {}",
               SplitName(split), dir, data.size(), data.channels, data.height, data.width,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count(),
               DescribeCacheUse(cache_use), threads, device.device);
  if (!cache_use.bypassed.empty()) spdlog::warn("--data-cache not used for {}", cache_use.bypassed);

  auto metrics = std::make_shared<WorkerMetrics>(std::make_shared<prometheus::Registry>());
  metrics->SetDevice(device.device);  // the loops set the one the model runs on
  std::unique_ptr<HttpServer> http;
  ServiceEndpointOptions endpoints;
  endpoints.address = options.http_address;
  endpoints.port = options.http_port;
  endpoints.registry = metrics->registry();
  endpoints.ports_file = options.ports_file;
  GAPTRAIN_RETURN_IF_ERROR(StartServiceEndpoints(endpoints, &http));
  spdlog::info("worker {} ({}) of job {}: metrics on http://{}:{}/metrics", options.host_name,
               options.evaluator ? "evaluator" : "trainer", job.name, options.http_address,
               http->port());

  std::shared_ptr<grpc::ChannelCredentials> coordinator_credentials, master_credentials;
  GAPTRAIN_RETURN_IF_ERROR(
      ChannelCredentialsFromCa("--coordinator-ca", options.coordinator_ca, &coordinator_credentials));
  GAPTRAIN_RETURN_IF_ERROR(
      ChannelCredentialsFromCa("--master-ca", options.master_ca, &master_credentials));
  CoordinatorClient::Options coordinator_options;
  coordinator_options.token = options.token;
  coordinator_options.deadline_seconds = kCoordinatorDeadlineSeconds;
  // A factory: the client makes the channel again while the coordinator is
  // unreachable, so one back at a new address is found at once.
  CoordinatorClient::ChannelFactory make_coordinator_channel =
      [target = options.coordinator, credentials = coordinator_credentials] {
        return CreateWorkerChannel(target, credentials, ChannelKind::kCoordinator);
      };
  CoordinatorClient coordinator(std::move(make_coordinator_channel), coordinator_options);
  // A trainer pulls and pushes in the job's spec.training.wireType; the
  // evaluator pulls fp32.
  MasterLink::Connector connect;
  GAPTRAIN_RETURN_IF_ERROR(
      MasterConnector(job, options.evaluator ? MasterRole::kEvaluator : MasterRole::kTrainer,
                      options.token, kMasterDeadlineSeconds, master_credentials, &connect));

  const uint64_t seed = std::hash<std::string>()(options.host_name);
  CoordinatorSession::Options session_options;
  session_options.host = options.host_name;
  session_options.role =
      options.evaluator ? proto::WORKER_ROLE_EVALUATOR : proto::WORKER_ROLE_TRAINER;
  session_options.retry = DefaultRetry();
  session_options.seed = seed;
  // A heartbeat's reply is how the evaluator learns that the job ended, and
  // the job waits for its final evaluation: a third of the lease (2 s by
  // default) would keep everyone waiting up to that long.
  if (options.evaluator) session_options.heartbeat_seconds = 0.5;
  CoordinatorSession session(&coordinator, session_options, stop, metrics.get());

  LoopOptions loop;
  loop.retry = DefaultRetry();
  loop.seed = seed;
  loop.grace_seconds = options.grace_seconds;
  loop.device = device.device;
  Status s;
  if (options.evaluator) {
    EvaluationLoop evaluator(job, data, &session, connect, stop, metrics.get(),
                             EvaluationLoop::Options(loop));
    s = evaluator.Run();
  } else {
    Trainer trainer(job, data, &session, connect, stop, metrics.get(), Trainer::Options(loop));
    s = trainer.Run();
  }
  http->Stop();
  return s;
}

}  // namespace gaptrain
