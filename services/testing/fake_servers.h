// In-process fakes of the master and the coordinator for worker tests:
// gRPC servers on 127.0.0.1:<ephemeral> whose answers a test scripts, so
// the Trainer and the EvaluationLoop can be fed garbage (a wrong model
// size, malformed or truncated streams, refusals, outages) that a real
// server never sends. They record what the worker sent. Thread-safe.

#ifndef GAPTRAIN_SERVICES_TESTING_FAKE_SERVERS_H_
#define GAPTRAIN_SERVICES_TESTING_FAKE_SERVERS_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "proto/gaptrain.grpc.pb.h"
#include "services/engine/parameter_layout.h"

namespace gaptrain {

class FakeMaster final : public proto::Master::Service {
 public:
  enum class PullMode {
    kGood,
    kWrongTotal,      // total_values is P + 1
    kMalformedChunk,  // a chunk at the wrong offset
    kNoChunk,         // the stream ends without a chunk
    kTruncated,       // half of the values, then OK
    kUnavailable,     // UNAVAILABLE
  };
  enum class PushMode {
    kGood,             // APPLIED, the version advances
    kInvalidArgument,  // always refused as invalid
    kStale,            // FAILED_PRECONDITION
    kUnauthenticated,
    kUnavailable,
  };

  // θ has layout.size() values, filled with a fixed pattern.
  explicit FakeMaster(const ParameterLayout& layout);
  ~FakeMaster() override;

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  // Script: the first `times` calls answer with `mode` (times < 0: every
  // call), later ones kGood. For pulls, the script starts after the first
  // `after` pulls (a PushPull's pull counts).
  void SetPull(PullMode mode, int times = -1, int after = 0);
  void SetPush(PushMode mode, int times = -1);
  // Whether PushPull is served (a push scripted by SetPush, then a pull by
  // SetPull whose first chunk carries the push's outcome); false, the
  // default: UNIMPLEMENTED, as from a master older than PushPull.
  void SetPushPull(bool supported);
  void SetRule(const std::string& rule, bool needs_echo = false,
               proto::WireType echo_type = proto::FLOAT32);
  // Describe reports this layout instead of the real one.
  void SetDescribedLayout(const ParameterLayout& layout);
  // Describe names this master shard `index` of `count`, holding [begin,
  // end) of the described layout (θ is that range's: construct it with
  // the range's size).
  void SetShard(uint32_t index, uint32_t count, uint64_t begin, uint64_t end);
  void SetVersion(uint64_t version);
  // Multiplies every value of θ by `factor` (0: a model whose outputs are
  // uniform; large: one that is confidently wrong on random data).
  void ScaleTheta(float factor);
  // Answers as master run `run` (Describe, pull chunks, push replies).
  void SetRun(uint64_t run);
  // Once `after_pushes` pushes have been applied, the master "restarts":
  // it becomes run `new_run`, resumed from the current run's checkpoint
  // at `restored_version`, its version back at that.
  void RestartAfter(int after_pushes, uint64_t new_run, uint64_t restored_version);

  const std::vector<float>& theta() const { return theta_; }
  int pulls() const;
  int observer_pulls() const;
  int pushes_received() const;  // every push stream, accepted or not
  int pushes_applied() const;
  int push_pulls() const;  // PushPull calls served (each also counts as a push and a pull)
  // The first accepted push's gradient (decoded) and echo (raw bytes).
  std::vector<float> first_gradient() const;
  std::string first_echo() const;
  // Wire types: of each pull request (the reply is sent in it) and of each
  // push's gradient chunks, in order; and the value bytes that travelled
  // (pull replies, pushed gradients without echoes).
  std::vector<proto::WireType> pull_wire_types() const;
  std::vector<proto::WireType> push_wire_types() const;
  uint64_t pulled_value_bytes() const;
  uint64_t pushed_value_bytes() const;

  grpc::Status Describe(grpc::ServerContext*, const proto::DescribeRequest*,
                        proto::DescribeResponse* response) override;
  grpc::Status Pull(grpc::ServerContext*, const proto::PullRequest* request,
                    grpc::ServerWriter<proto::ParameterChunk>* writer) override;
  grpc::Status Push(grpc::ServerContext*, grpc::ServerReader<proto::GradientChunk>* reader,
                    proto::PushResponse* response) override;
  grpc::Status PushPull(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<proto::ParameterChunk, proto::GradientChunk>* stream) override;

 private:
  using ChunkReader = std::function<bool(proto::GradientChunk*)>;
  using ChunkWriter = std::function<bool(const proto::ParameterChunk&)>;
  grpc::Status ApplyPush(const ChunkReader& read, proto::PushResponse* response);
  grpc::Status SendPull(const proto::PullRequest& request, const ChunkWriter& write,
                        const proto::PushResponse* push);
  proto::WireType last_push_wire_type() const;
  proto::MasterIncarnation run() const;

  const ParameterLayout layout_;
  std::vector<float> theta_;
  proto::ShardRange shard_;  // count 0: none said
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;

  mutable std::mutex mu_;
  ParameterLayout described_;
  std::string rule_ = "gap-aware";
  bool needs_echo_ = false;
  proto::WireType echo_type_ = proto::FLOAT32;
  uint64_t version_ = 0;
  proto::MasterIncarnation run_;
  int restart_after_ = -1;
  proto::MasterIncarnation next_run_;
  PullMode pull_mode_ = PullMode::kGood;
  int pull_times_ = 0;
  int pull_after_ = 0;
  PushMode push_mode_ = PushMode::kGood;
  int push_times_ = 0;
  bool push_pull_ = false;
  int pulls_ = 0, observer_pulls_ = 0, pushes_received_ = 0, pushes_applied_ = 0;
  int push_pulls_ = 0;
  std::vector<float> first_gradient_;
  std::string first_echo_;
  std::vector<proto::WireType> pull_wire_types_, push_wire_types_;
  uint64_t pulled_value_bytes_ = 0, pushed_value_bytes_ = 0;
};

class FakeCoordinator final : public proto::Coordinator::Service {
 public:
  // Hands out one task, positions [0, train_samples) of epoch 0 (or
  // `task` when set), then JOB_FINISHED.
  FakeCoordinator(const std::string& master_address, uint32_t train_samples, uint32_t batch_size);
  ~FakeCoordinator() override;

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  void SetTask(const proto::DataTask& task);
  // Registration names these masters (shard i's address at i) beside the
  // constructor's.
  void SetMasterAddresses(const std::vector<std::string>& addresses);
  // ReportEvaluation answers this phase.
  void SetPhaseAfterEvaluation(proto::JobPhase phase);

  int registrations() const;
  int completions() const;
  // The last CompleteTask request received.
  proto::CompleteTaskRequest last_completion() const;
  int heartbeats() const;
  proto::LeaveReason leave_reason() const;  // UNSPECIFIED: never left
  std::string leave_message() const;
  std::vector<proto::ReportEvaluationRequest> evaluations() const;

  grpc::Status Register(grpc::ServerContext*, const proto::RegisterRequest* request,
                        proto::RegisterResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext*, const proto::HeartbeatRequest* request,
                         proto::HeartbeatResponse* response) override;
  grpc::Status NextTask(grpc::ServerContext*, const proto::NextTaskRequest* request,
                        proto::NextTaskResponse* response) override;
  grpc::Status CompleteTask(grpc::ServerContext*, const proto::CompleteTaskRequest* request,
                            proto::CompleteTaskResponse* response) override;
  grpc::Status Leave(grpc::ServerContext*, const proto::LeaveRequest* request,
                     proto::LeaveResponse* response) override;
  grpc::Status ReportEvaluation(grpc::ServerContext*, const proto::ReportEvaluationRequest* request,
                                proto::ReportEvaluationResponse* response) override;
  grpc::Status Status(grpc::ServerContext*, const proto::CoordinatorStatusRequest*,
                      proto::CoordinatorStatusResponse* response) override;

 private:
  const std::string master_address_;
  const uint32_t train_samples_;
  const uint32_t batch_size_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;

  mutable std::mutex mu_;
  proto::DataTask task_;
  bool task_given_ = false;
  bool finished_ = false;
  proto::JobPhase phase_after_evaluation_ = proto::JOB_PHASE_RUNNING;
  std::vector<std::string> master_addresses_;
  proto::WorkerRole role_ = proto::WORKER_ROLE_TRAINER;
  int registrations_ = 0, completions_ = 0, heartbeats_ = 0;
  proto::CompleteTaskRequest last_completion_;
  proto::LeaveReason leave_reason_ = proto::LEAVE_REASON_UNSPECIFIED;
  std::string leave_message_;
  std::vector<proto::ReportEvaluationRequest> evaluations_;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_TESTING_FAKE_SERVERS_H_
