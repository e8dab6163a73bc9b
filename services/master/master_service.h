// MasterService: the master's gRPC API (proto/gaptrain.proto, service
// Master) over an UpdateEngine. Eight verbs: Describe, Pull, Push, PushPull
// (a push and the worker's next pull in one call: one round trip per
// training step), SetMembers, Checkpoint, and PushBuffers and PullBuffers
// for the module's buffers (ModelBuffers: a member sends its own every
// few pushes, the evaluator and starting trainers read the master's).
//
// Concurrency: one mutex guards the engine. Under the mutex a pull takes
// the reply of the current model (one immutable, shared buffer per
// UpdateEngine::reply_generation(): the first pull after a change copies
// it, later ones share it), then streams it without the mutex, so a pull
// always sees whole updates and a slow reader never blocks others. A push
// is received and checked for NaN/Inf without the mutex, staying in the
// slices gRPC received it in, and takes the mutex only to apply (the rule
// decodes the values as it goes): applying is never serialised behind
// network I/O. A push whose stream ends early is never applied.
//
// Every RPC must carry "authorization: Bearer <token>" when a token is
// configured; otherwise it fails with UNAUTHENTICATED.
//
// Shards (spec.master.shards): the engine may hold one range of θ; Pull,
// Push and PushPull carry that range, offsets counted from its start, and
// Describe names it beside the whole model's layout. The module's buffers
// live on shard 0; another shard refuses PushBuffers and PullBuffers with
// FAILED_PRECONDITION.
//
// Restarts: every answer names the master's run (Options::incarnation):
// pull chunks and push replies its id, Describe and SetMembers also what
// it resumed from, and SetMembers the newest version on disk
// (SetDurableVersion), so the coordinator can tell which updates a restart
// lost. Every push answered goes into the job's PushLedger when one is
// given.

#ifndef GAPTRAIN_SERVICES_MASTER_MASTER_SERVICE_H_
#define GAPTRAIN_SERVICES_MASTER_MASTER_SERVICE_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "proto/gaptrain.grpc.pb.h"
#include "services/base/status.h"
#include "services/engine/shard_plan.h"
#include "services/engine/update_engine.h"
#include "services/master/buffer_pool.h"
#include "services/master/bulk_transfer.h"
#include "services/master/master_metrics.h"
#include "services/master/model_buffers.h"
#include "services/master/push_ledger.h"
#include "services/master/step_waiters.h"

namespace gaptrain {

// Maps a gaptrain Status onto gRPC (the codes are numbered alike).
grpc::Status ToGrpcStatus(const Status& status);

// Pull, Push and PushPull are raw callback methods: their chunks are written and
// read as gRPC byte buffers whose payload slices point at model buffers
// (chunk_wire.h), so parameters and gradients are not copied into and out
// of protobuf messages. The other verbs are plain synchronous methods.
using MasterServiceBase = proto::Master::WithRawCallbackMethod_Pull<
    proto::Master::WithRawCallbackMethod_Push<
        proto::Master::WithRawCallbackMethod_PushPull<proto::Master::Service>>>;

class MasterService final : public MasterServiceBase {
 public:
  struct Options {
    std::string job_name;
    std::string token;  // empty: no authentication (tests, trusted loopback)
    // Values per Pull chunk unless the client asks; at most kMaxChunkValues.
    uint32_t default_chunk_values = 256 * 1024;  // 1 MiB of fp32
    proto::MasterIncarnation incarnation;  // which run this is; id 0: unknown
    PushLedger* ledger = nullptr;  // borrowed; null: no ledger (tests)
    // The module's buffers; null: the model has none (or they live on
    // another shard).
    std::shared_ptr<ModelBuffers> buffers;
    // spec.master.shards: the part of θ the engine holds (its layout is
    // ShardLayout(model_layout, shard)) and the whole model's layouts, which
    // Describe reports and declarations are checked against. Left empty
    // (no tensors): the engine holds the whole model, shard 0 of 1.
    ParameterShard shard;
    ParameterLayout model_layout;
    BufferLayout model_buffers;
  };
  static constexpr uint32_t kMaxChunkValues = kBulkMaxChunkValues;
  static constexpr int kMaxMessageBytes = kBulkMaxMessageBytes;
  // How long a sync-mode PushPull waits for the step its gradient joined
  // before it answers with the parameters the worker has (which then asks
  // again): well inside any client's deadline.
  static constexpr std::chrono::milliseconds kStepWaitLimit{1000};

  // Writes a checkpoint and reports where; wired by the master process.
  using CheckpointFn = std::function<Status(std::string* path, uint64_t* version)>;

  MasterService(std::unique_ptr<UpdateEngine> engine, Options options,
                std::shared_ptr<MasterMetrics> metrics);

  void set_checkpoint_fn(CheckpointFn fn) { checkpoint_fn_ = std::move(fn); }

  // A checkpoint at `version` is on disk (SetMembers reports the newest).
  void SetDurableVersion(uint64_t version);
  // The server is up: the first update after it is timed
  // (gaptrain_master_first_update_seconds, and a log line).
  void MarkServing();

  // Runs `fn` with the engine under the mutex (checkpoints, summaries).
  void WithEngine(const std::function<void(UpdateEngine*)>& fn);

  grpc::Status Describe(grpc::ServerContext* context, const proto::DescribeRequest* request,
                        proto::DescribeResponse* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Pull(grpc::CallbackServerContext* context,
                                                   const grpc::ByteBuffer* request) override;
  grpc::ServerReadReactor<grpc::ByteBuffer>* Push(grpc::CallbackServerContext* context,
                                                  grpc::ByteBuffer* response) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* PushPull(
      grpc::CallbackServerContext* context) override;
  grpc::Status SetMembers(grpc::ServerContext* context, const proto::SetMembersRequest* request,
                          proto::SetMembersResponse* response) override;
  grpc::Status Checkpoint(grpc::ServerContext* context, const proto::CheckpointRequest* request,
                          proto::CheckpointResponse* response) override;
  // A member's buffers (NOT_FOUND from a worker that is no member, as for a
  // push; INVALID_ARGUMENT for values that do not fit the model's buffers;
  // FAILED_PRECONDITION once θ is at the job's maxUpdates and a push past
  // it was discarded).
  grpc::Status PushBuffers(grpc::ServerContext* context, const proto::PushBuffersRequest* request,
                           proto::PushBuffersResponse* response) override;
  grpc::Status PullBuffers(grpc::ServerContext* context, const proto::PullBuffersRequest* request,
                           proto::PullBuffersResponse* response) override;
  // spec.model.fromTrainer: a trainer's declaration once the master holds
  // the model (AwaitingModelService adopts the first): not adopted, or
  // FAILED_PRECONDITION naming how it differs.
  grpc::Status DeclareModel(grpc::ServerContext* context,
                            grpc::ServerReader<proto::ModelDeclaration>* reader,
                            proto::DeclareModelResponse* response) override;

  // The module's buffers (never null: empty for a model without any).
  const std::shared_ptr<ModelBuffers>& buffers() const { return buffers_; }

 private:
  class PullReply;
  class PushReceiver;
  class PullReactor;
  class PushReactor;
  class PushPullReactor;

  grpc::Status Authorize(const grpc::ServerContextBase* context) const;
  // Count and log a push or pull the service refuses before the engine
  // sees it, and return `status` for the caller to finish the call with.
  grpc::Status RejectPush(RejectReason reason, grpc::Status status);
  grpc::Status RejectMalformed(const std::string& message);  // a push stream
  grpc::Status NoBuffersOnThisShard() const;
  grpc::Status RejectPull(RejectReason reason, grpc::Status status);
  // An accepted push's bookkeeping outside the engine: the ledger (under
  // the engine's mutex, with `version` after it), the totals, the first
  // update.
  void NoteAcceptedLocked(uint64_t version, const ApplyStats& stats);
  // Resumes the PushPull calls whose step is out (not under mu_).
  void ReleaseStepWaiters();

  const Options options_;
  const std::shared_ptr<MasterMetrics> metrics_;
  const size_t num_values_;      // P, fixed for the engine's lifetime
  const bool needs_echo_;
  const proto::WireType echo_type_;
  CheckpointFn checkpoint_fn_;
  const std::shared_ptr<BufferPool> pool_;
  const std::shared_ptr<ModelBuffers> buffers_;
  std::atomic<uint64_t> durable_version_{0};
  std::atomic<int64_t> serving_since_ns_{0};  // steady clock; 0: not yet
  std::atomic<bool> first_update_seen_{false};  // P-float buffers for pull replies

  // A pull reply, immutable once written, shared by every pull while the
  // engine's reply_generation() stays `generation`. Replaced (never
  // rewritten) when a pull finds the generation moved; pulls in flight keep
  // the buffer they hold, which returns to the pool after the last one.
  struct SharedReply {
    uint64_t generation = 0;
    std::shared_ptr<const std::vector<float>> values;  // null: none yet
  };

  StepWaiters step_waiters_;
  std::mutex mu_;  // guards engine_, shared_replies_ and totals_
  std::unique_ptr<UpdateEngine> engine_;
  // This run's training for SetMembers (the coordinator sums shards).
  proto::MasterTotals totals_;
  SharedReply shared_replies_[2];  // [0]: workers' reply, [1]: θ for observers
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_MASTER_MASTER_SERVICE_H_
