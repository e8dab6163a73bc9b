// CoordinatorService: the coordinator's gRPC API (proto/gaptrain.proto,
// service Coordinator) over a CoordinatorState: Register, Heartbeat,
// NextTask, CompleteTask, ReleaseTask, Leave, ReportEvaluation, Status. A
// thin layer: it checks the token, converts messages, and runs the core's
// verb under one mutex with the clock's `now`.
//
// What callers may rely on:
//   - Every RPC needs "authorization: Bearer <token>" when a token is
//     configured (UNAUTHENTICATED otherwise), as the master's do.
//   - Bad input gets the core's precise code and message, is counted in
//     gaptrain_coordinator_requests_rejected_total{verb,code}, and changes
//     nothing.
//   - A change a restart must not lose (an id issued, a task assigned,
//     completed or handed back, a departure, a phase) is handed to the
//     persist function before the reply; if it fails the call is
//     UNAVAILABLE and retrying it is safe (NextTask, CompleteTask and
//     ReleaseTask are idempotent). Heartbeat progress is persisted lazily
//     by PersistNow().
//   - When the master's member set changes, the members function gets the
//     new set with a growing generation, called without the mutex, so it
//     may block or take other locks; a receiver keeps the newest
//     generation (calls from two threads may arrive out of order).

#ifndef GAPTRAIN_SERVICES_COORDINATOR_COORDINATOR_SERVICE_H_
#define GAPTRAIN_SERVICES_COORDINATOR_COORDINATOR_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "proto/gaptrain.grpc.pb.h"
#include "services/base/status.h"
#include "services/coordinator/coordinator_metrics.h"
#include "services/coordinator/coordinator_state.h"

namespace gaptrain {

class CoordinatorService final : public proto::Coordinator::Service {
 public:
  struct Options {
    std::string token;           // empty: no authentication
    // Handed to workers at registration: master shard i's address at i
    // (RegisterResponse.master_addresses; master_address is the first).
    std::vector<std::string> master_addresses;
    // What NextTask tells a worker that must wait: while the job waits for
    // its trainers, to ask again soon, since it starts the moment the last
    // one registers (in sync mode a trainer without a task is no member, so
    // the first steps would go on without it); while an epoch's last tasks
    // finish elsewhere, later.
    uint32_t wait_for_workers_retry_ms = 100;
    uint32_t retry_after_ms = 1000;
  };
  // Seconds on a monotonic clock whose values are Unix-like (see
  // docs/coordinator.md); tests pass a fake one.
  using Clock = std::function<double()>;
  using PersistFn = std::function<::gaptrain::Status(const proto::CoordinatorSnapshot&)>;
  using MembersFn = std::function<void(uint64_t generation, const std::vector<WorkerId>&)>;

  CoordinatorService(std::unique_ptr<CoordinatorState> state, Options options,
                     std::shared_ptr<CoordinatorMetrics> metrics, Clock clock);

  // Set before serving.
  void set_persist_fn(PersistFn fn) { persist_fn_ = std::move(fn); }
  void set_members_fn(MembersFn fn) { members_fn_ = std::move(fn); }

  // Expires leases and moves the lifecycle at the clock's now (the
  // process's timer calls it every 200 ms).
  void Tick();
  // Master shard `shard`'s membership feed's outcome: whether it answered
  // (`error` names the shard).
  void ReportMasterHealth(uint32_t shard, bool reachable, const std::string& error);
  // What master shard `shard` said about itself in its SetMembers reply
  // (see CoordinatorState::ObserveMaster).
  void ObserveMaster(uint32_t shard, const MasterRun& run, uint64_t version,
                     uint64_t durable_version);
  // ... and its training so far (CoordinatorState::ObserveMasterTotals).
  void ObserveMasterTotals(uint32_t shard, const ShardTotals& totals);
  // Persists the state if anything changed since the last write (also
  // heartbeat progress); `force` writes anyway.
  ::gaptrain::Status PersistNow(bool force);
  // Sends the current member set to the members function (at start).
  void PublishMembers();

  JobStatus Describe();
  // Runs `fn` on the state under the mutex (tests, summaries).
  void WithState(const std::function<void(const CoordinatorState&)>& fn);

  grpc::Status Register(grpc::ServerContext* context, const proto::RegisterRequest* request,
                        proto::RegisterResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* context, const proto::HeartbeatRequest* request,
                         proto::HeartbeatResponse* response) override;
  grpc::Status NextTask(grpc::ServerContext* context, const proto::NextTaskRequest* request,
                        proto::NextTaskResponse* response) override;
  grpc::Status CompleteTask(grpc::ServerContext* context,
                            const proto::CompleteTaskRequest* request,
                            proto::CompleteTaskResponse* response) override;
  grpc::Status ReleaseTask(grpc::ServerContext* context,
                           const proto::ReleaseTaskRequest* request,
                           proto::ReleaseTaskResponse* response) override;
  grpc::Status Leave(grpc::ServerContext* context, const proto::LeaveRequest* request,
                     proto::LeaveResponse* response) override;
  grpc::Status ReportEvaluation(grpc::ServerContext* context,
                                const proto::ReportEvaluationRequest* request,
                                proto::ReportEvaluationResponse* response) override;
  grpc::Status Status(grpc::ServerContext* context, const proto::CoordinatorStatusRequest* request,
                      proto::CoordinatorStatusResponse* response) override;

 private:
  // What changed during one verb, gathered under the mutex and acted on
  // after it (logging, the members function).
  struct Changes {
    bool members_changed = false;
    uint64_t members_generation = 0;
    std::vector<WorkerId> members;
    bool phase_changed = false;
    JobCondition condition;
  };

  // Under the mutex, after a verb: persists durable changes (their failure
  // is the call's result), updates metrics, collects membership and phase
  // changes.
  ::gaptrain::Status AfterVerb(Changes* changes);
  // Without the mutex: logs phase changes and publishes members.
  void Publish(const Changes& changes);
  // Counts and logs a refused call, and returns it as a gRPC status.
  grpc::Status Reject(const char* verb, const ::gaptrain::Status& status);
  ::gaptrain::Status PersistLocked();

  const Options options_;
  const std::shared_ptr<CoordinatorMetrics> metrics_;
  const Clock clock_;
  PersistFn persist_fn_;
  MembersFn members_fn_;

  std::mutex mu_;  // guards everything below
  std::unique_ptr<CoordinatorState> state_;
  uint64_t persisted_durable_ = 0;
  uint64_t persisted_progress_ = 0;
  bool ever_persisted_ = false;
  uint64_t published_members_ = 0;
  JobPhase last_phase_;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_COORDINATOR_COORDINATOR_SERVICE_H_
