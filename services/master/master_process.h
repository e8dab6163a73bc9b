// MasterProcess: a running gaptrain-master. It wires the pieces: the
// UpdateEngine, restored from the newest valid checkpoint or initialised
// from the job's model (or, with spec.model.fromTrainer and nothing to
// restore, from the first trainer's declaration: until then it serves
// AwaitingModelService, then the engine's service on the same port); the gRPC MasterService, with the standard health
// service and TLS when configured; /metrics and /healthz over HTTP;
// checkpoints every intervalSeconds and on request; a periodic summary
// log. Shutdown() writes a final checkpoint. With spec.master.shards it
// holds the range of θ its --shard names (services/engine/shard_plan.h),
// checkpointed in DIR/shard-I.
//
// Each start is a new run of the job's master (proto MasterIncarnation):
// its id is above every earlier run's, and it records what it resumed
// from; the job's PushLedger (in the checkpoint directory) carries the
// push accounting across runs and counts the updates a restart lost.

#ifndef GAPTRAIN_SERVICES_MASTER_MASTER_PROCESS_H_
#define GAPTRAIN_SERVICES_MASTER_MASTER_PROCESS_H_

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "services/api/training_job.h"
#include "services/base/status.h"
#include "services/master/awaiting_model_service.h"
#include "services/master/checkpoint.h"
#include "services/master/master_metrics.h"
#include "services/master/master_options.h"
#include "services/master/master_service.h"
#include "services/master/model_declaration.h"
#include "services/master/push_ledger.h"
#include "services/net/http_server.h"

namespace gaptrain {

class MasterProcess {
 public:
  static Status Start(const MasterOptions& options, const TrainingJob& job,
                      std::unique_ptr<MasterProcess>* process);
  ~MasterProcess();

  int grpc_port() const { return grpc_port_; }
  uint16_t http_port() const { return http_->port(); }

  // Writes a checkpoint now (also what the Checkpoint RPC does).
  Status CheckpointNow(std::string* path, uint64_t* version);

  // Stops accepting calls, finishes those in flight, writes a final
  // checkpoint. Idempotent.
  void Shutdown();

 private:
  // What a checkpoint restored.
  struct Restored {
    std::unique_ptr<ParameterStore> store;
    CheckpointMeta meta;
    std::string path;
  };

  MasterProcess() = default;
  // Builds the engine from `restored` (when not null) or `fresh`, and
  // serves it: MasterService, its metrics, the gRPC server on `server`.
  Status Serve(Restored* restored, std::optional<DeclaredModel> fresh, const ServerFlags& server);
  // Waits for a declaration, then serves it; false when stopped first.
  bool ServeDeclaredModel();
  void BackgroundLoop();
  // The ledger's totals into the metrics.
  void RefreshJobTotals();

  TrainingJob job_;
  MasterOptions options_;
  UpdateEngine::Options engine_options_;
  std::shared_ptr<prometheus::Registry> registry_;  // /metrics, before any model
  std::unique_ptr<AwaitingModelService> awaiting_;  // fromTrainer, until declared
  std::shared_ptr<MasterMetrics> metrics_;
  std::unique_ptr<MasterService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<CheckpointDirectory> checkpoints_;
  std::unique_ptr<PushLedger> ledger_;  // null when it could not be opened
  proto::MasterIncarnation incarnation_;
  int grpc_port_ = 0;
  // What this master holds of the model (set by Serve): its part of θ and
  // the whole model's layouts.
  ParameterShard shard_;
  ParameterLayout model_layout_;
  BufferLayout model_buffers_;

  std::mutex checkpoint_mu_;  // one checkpoint at a time
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool shut_down_ = false;
  std::thread background_;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_MASTER_MASTER_PROCESS_H_
