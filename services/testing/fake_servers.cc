#include "services/testing/fake_servers.h"

#include <cmath>
#include <cstring>

#include "services/master/layout_proto.h"
#include "services/net/grpc_keepalive.h"
#include "services/numeric/bfloat16.h"
#include "services/numeric/wire_values.h"

namespace gaptrain {
namespace {

template <class Service>
std::unique_ptr<grpc::Server> Serve(Service* service, int* port) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), port);
  builder.SetMaxReceiveMessageSize(64 << 20);
  ApplyKeepaliveArguments(&builder);
  builder.RegisterService(service);
  return builder.BuildAndStart();
}

// Consumes one scripted answer: true while `times` says the mode applies.
bool Take(int* times) {
  if (*times == 0) return false;
  if (*times > 0) --*times;
  return true;
}

// n values as `type` on the wire.
std::string Bytes(const float* values, size_t n, proto::WireType type = proto::FLOAT32) {
  if (type == proto::BFLOAT16) {
    std::vector<bf16_t> bf(n);
    FloatsToBf16(values, n, bf.data());
    return std::string(reinterpret_cast<const char*>(bf.data()), n * sizeof(bf16_t));
  }
  return std::string(reinterpret_cast<const char*>(values), n * sizeof(float));
}

}  // namespace

FakeMaster::FakeMaster(const ParameterLayout& layout)
    : layout_(layout), theta_(layout.size()), described_(layout) {
  for (size_t j = 0; j < theta_.size(); ++j) {
    theta_[j] = 0.05f * std::sin(static_cast<float>(j) * 0.37f);
  }
  server_ = Serve(this, &port_);
}

FakeMaster::~FakeMaster() { server_->Shutdown(); }

void FakeMaster::SetPull(PullMode mode, int times, int after) {
  std::lock_guard<std::mutex> lock(mu_);
  pull_mode_ = mode;
  pull_times_ = times;
  pull_after_ = after;
}

void FakeMaster::SetPush(PushMode mode, int times) {
  std::lock_guard<std::mutex> lock(mu_);
  push_mode_ = mode;
  push_times_ = times;
}

void FakeMaster::SetRule(const std::string& rule, bool needs_echo, proto::WireType echo_type) {
  std::lock_guard<std::mutex> lock(mu_);
  rule_ = rule;
  needs_echo_ = needs_echo;
  echo_type_ = echo_type;
}

void FakeMaster::SetDescribedLayout(const ParameterLayout& layout) {
  std::lock_guard<std::mutex> lock(mu_);
  described_ = layout;
}

void FakeMaster::SetShard(uint32_t index, uint32_t count, uint64_t begin, uint64_t end) {
  std::lock_guard<std::mutex> lock(mu_);
  shard_.set_index(index);
  shard_.set_count(count);
  shard_.set_begin(begin);
  shard_.set_end(end);
}

void FakeMaster::SetVersion(uint64_t version) {
  std::lock_guard<std::mutex> lock(mu_);
  version_ = version;
}

void FakeMaster::ScaleTheta(float factor) {
  std::lock_guard<std::mutex> lock(mu_);
  for (float& v : theta_) v *= factor;
}

void FakeMaster::SetRun(uint64_t run) {
  std::lock_guard<std::mutex> lock(mu_);
  run_.set_id(run);
}

void FakeMaster::RestartAfter(int after_pushes, uint64_t new_run, uint64_t restored_version) {
  std::lock_guard<std::mutex> lock(mu_);
  restart_after_ = after_pushes;
  next_run_.set_id(new_run);
  next_run_.set_restored_from_id(run_.id());
  next_run_.set_restored_from_version(restored_version);
}

int FakeMaster::pulls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pulls_;
}
int FakeMaster::observer_pulls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return observer_pulls_;
}
int FakeMaster::pushes_received() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pushes_received_;
}
void FakeMaster::SetPushPull(bool supported) {
  std::lock_guard<std::mutex> lock(mu_);
  push_pull_ = supported;
}

int FakeMaster::push_pulls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return push_pulls_;
}

proto::MasterIncarnation FakeMaster::run() const {
  std::lock_guard<std::mutex> lock(mu_);
  return run_;
}

proto::WireType FakeMaster::last_push_wire_type() const {
  std::lock_guard<std::mutex> lock(mu_);
  return push_wire_types_.empty() ? proto::FLOAT32 : push_wire_types_.back();
}

int FakeMaster::pushes_applied() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pushes_applied_;
}
std::vector<float> FakeMaster::first_gradient() const {
  std::lock_guard<std::mutex> lock(mu_);
  return first_gradient_;
}
std::string FakeMaster::first_echo() const {
  std::lock_guard<std::mutex> lock(mu_);
  return first_echo_;
}
std::vector<proto::WireType> FakeMaster::pull_wire_types() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pull_wire_types_;
}
std::vector<proto::WireType> FakeMaster::push_wire_types() const {
  std::lock_guard<std::mutex> lock(mu_);
  return push_wire_types_;
}
uint64_t FakeMaster::pulled_value_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pulled_value_bytes_;
}
uint64_t FakeMaster::pushed_value_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pushed_value_bytes_;
}

grpc::Status FakeMaster::Describe(grpc::ServerContext*, const proto::DescribeRequest*,
                                  proto::DescribeResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  response->set_job_name("fake-job");
  LayoutToProto(described_, response->mutable_layout());
  response->set_rule(rule_);
  response->set_version(version_);
  response->set_learning_rate(0.1);
  response->set_needs_echo(needs_echo_);
  response->set_echo_type(echo_type_);
  response->set_live_workers(1);
  *response->mutable_incarnation() = run_;
  if (shard_.count() > 0) *response->mutable_shard() = shard_;
  return grpc::Status::OK;
}

grpc::Status FakeMaster::Pull(grpc::ServerContext*, const proto::PullRequest* request,
                              grpc::ServerWriter<proto::ParameterChunk>* writer) {
  return SendPull(*request, [&](const proto::ParameterChunk& c) { return writer->Write(c); },
                  nullptr);
}

grpc::Status FakeMaster::SendPull(const proto::PullRequest& pull, const ChunkWriter& write,
                                  const proto::PushResponse* push) {
  const proto::PullRequest* request = &pull;
  // The first chunk carries the push's outcome (PushPull).
  bool first = true;
  auto emit = [&](proto::ParameterChunk chunk) {
    if (first && push != nullptr) *chunk.mutable_push() = *push;
    first = false;
    return write(chunk);
  };
  PullMode mode;
  uint64_t version, run;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++pulls_;
    if (request->observer()) ++observer_pulls_;
    pull_wire_types_.push_back(request->wire_type());
    const bool scripted = pull_after_ > 0 ? (--pull_after_, false) : Take(&pull_times_);
    mode = scripted ? pull_mode_ : PullMode::kGood;
    version = version_;
    run = run_.id();
  }
  const size_t p = theta_.size();
  proto::ParameterChunk chunk;
  chunk.set_version(version);
  chunk.set_incarnation(run);
  chunk.set_total_values(p);
  chunk.set_wire_type(proto::FLOAT32);  // the scripted faults stay fp32
  switch (mode) {
    case PullMode::kUnavailable:
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake master: down");
    case PullMode::kNoChunk:
      return grpc::Status::OK;
    case PullMode::kWrongTotal:
      chunk.set_total_values(p + 1);
      chunk.set_values(Bytes(theta_.data(), p));
      emit(chunk);
      return grpc::Status::OK;
    case PullMode::kMalformedChunk:
      chunk.set_offset(5);
      chunk.set_values(Bytes(theta_.data(), p - 5));
      emit(chunk);
      return grpc::Status::OK;
    case PullMode::kTruncated:
      chunk.set_values(Bytes(theta_.data(), p / 2));
      emit(chunk);
      return grpc::Status::OK;
    case PullMode::kGood:
      break;
  }
  if (request->known_version() >= 0 && static_cast<uint64_t>(request->known_version()) == version) {
    emit(chunk);  // not modified: no values
    return grpc::Status::OK;
  }
  // Two chunks in the requested type, as a real master would for a larger
  // model.
  const proto::WireType type = request->wire_type();
  const size_t half = p / 2;
  chunk.set_wire_type(type);
  chunk.set_values(Bytes(theta_.data(), half, type));
  emit(chunk);
  chunk.set_offset(half);
  chunk.set_values(Bytes(theta_.data() + half, p - half, type));
  emit(chunk);
  std::lock_guard<std::mutex> lock(mu_);
  pulled_value_bytes_ += p * WireTypeSize(type);
  return grpc::Status::OK;
}

grpc::Status FakeMaster::Push(grpc::ServerContext*,
                              grpc::ServerReader<proto::GradientChunk>* reader,
                              proto::PushResponse* response) {
  return ApplyPush([&](proto::GradientChunk* c) { return reader->Read(c); }, response);
}

grpc::Status FakeMaster::PushPull(
    grpc::ServerContext*,
    grpc::ServerReaderWriter<proto::ParameterChunk, proto::GradientChunk>* stream) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!push_pull_) {
      return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "fake master: an older master");
    }
    ++push_pulls_;
  }
  proto::PushResponse pushed;
  grpc::Status s = ApplyPush([&](proto::GradientChunk* c) { return stream->Read(c); }, &pushed);
  if (!s.ok()) return s;
  if (pushed.incarnation() != run().id()) {
    // The push ended the run (RestartAfter): the old run answers without
    // parameters, and the worker's next pull meets the new one.
    proto::ParameterChunk chunk;
    chunk.set_version(pushed.version());
    chunk.set_total_values(theta_.size());
    chunk.set_incarnation(pushed.incarnation());
    *chunk.mutable_push() = pushed;
    stream->Write(chunk);
    return grpc::Status::OK;
  }
  proto::PullRequest pull;
  pull.set_known_version(-1);
  pull.set_wire_type(last_push_wire_type());
  return SendPull(pull, [&](const proto::ParameterChunk& c) { return stream->Write(c); }, &pushed);
}

grpc::Status FakeMaster::ApplyPush(const ChunkReader& read, proto::PushResponse* response) {
  std::vector<float> gradient;
  std::string echo;
  proto::WireType type = proto::FLOAT32;
  uint64_t bytes = 0;
  proto::GradientChunk chunk;
  while (read(&chunk)) {
    type = chunk.wire_type();
    bytes += chunk.values().size();
    const size_t n = chunk.values().size() / WireTypeSize(type);
    const size_t at = gradient.size();
    gradient.resize(at + n);
    if (type == proto::BFLOAT16) {
      std::vector<bf16_t> bf(n);
      std::memcpy(bf.data(), chunk.values().data(), n * sizeof(bf16_t));
      Bf16ToFloats(bf.data(), n, gradient.data() + at);
    } else {
      std::memcpy(gradient.data() + at, chunk.values().data(), n * sizeof(float));
    }
    echo += chunk.echo();
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++pushes_received_;
  push_wire_types_.push_back(type);
  pushed_value_bytes_ += bytes;
  const PushMode mode = Take(&push_times_) ? push_mode_ : PushMode::kGood;
  switch (mode) {
    case PushMode::kInvalidArgument:
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "fake master: gradient has NaN");
    case PushMode::kStale:
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "fake master: too stale");
    case PushMode::kUnauthenticated:
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "fake master: wrong token");
    case PushMode::kUnavailable:
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake master: down");
    case PushMode::kGood:
      break;
  }
  if (pushes_applied_++ == 0) {
    first_gradient_ = gradient;
    first_echo_ = echo;
  }
  ++version_;
  response->set_outcome(proto::PushResponse::APPLIED);
  response->set_version(version_);
  response->set_incarnation(run_.id());
  if (restart_after_ >= 0 && pushes_applied_ == restart_after_) {
    // The reply is the last thing the old run says; the next call meets
    // the new one.
    restart_after_ = -1;
    run_ = next_run_;
    version_ = run_.restored_from_version();
  }
  return grpc::Status::OK;
}

FakeCoordinator::FakeCoordinator(const std::string& master_address, uint32_t train_samples,
                                 uint32_t batch_size)
    : master_address_(master_address), train_samples_(train_samples), batch_size_(batch_size) {
  task_.set_task_id(1);
  task_.set_epoch(0);
  task_.set_begin(0);
  task_.set_end(train_samples);
  server_ = Serve(this, &port_);
}

FakeCoordinator::~FakeCoordinator() { server_->Shutdown(); }

void FakeCoordinator::SetTask(const proto::DataTask& task) {
  std::lock_guard<std::mutex> lock(mu_);
  task_ = task;
}

void FakeCoordinator::SetMasterAddresses(const std::vector<std::string>& addresses) {
  std::lock_guard<std::mutex> lock(mu_);
  master_addresses_ = addresses;
}

void FakeCoordinator::SetPhaseAfterEvaluation(proto::JobPhase phase) {
  std::lock_guard<std::mutex> lock(mu_);
  phase_after_evaluation_ = phase;
}

int FakeCoordinator::registrations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return registrations_;
}
int FakeCoordinator::completions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return completions_;
}
proto::CompleteTaskRequest FakeCoordinator::last_completion() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_completion_;
}
int FakeCoordinator::heartbeats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return heartbeats_;
}
proto::LeaveReason FakeCoordinator::leave_reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return leave_reason_;
}
std::string FakeCoordinator::leave_message() const {
  std::lock_guard<std::mutex> lock(mu_);
  return leave_message_;
}
std::vector<proto::ReportEvaluationRequest> FakeCoordinator::evaluations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return evaluations_;
}

grpc::Status FakeCoordinator::Register(grpc::ServerContext*, const proto::RegisterRequest* request,
                                       proto::RegisterResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  ++registrations_;
  role_ = request->role() == proto::WORKER_ROLE_EVALUATOR ? proto::WORKER_ROLE_EVALUATOR
                                                          : proto::WORKER_ROLE_TRAINER;
  response->set_worker_id(1);
  response->set_role(role_);
  response->set_resumed(request->previous_id() == 1);
  response->set_job_name("fake-job");
  response->set_master_address(master_address_);
  for (const std::string& a : master_addresses_) response->add_master_addresses(a);
  response->set_lease_seconds(30);
  response->set_train_samples(train_samples_);
  response->set_shuffle_seed(1);
  response->set_batch_size(batch_size_);
  response->set_phase(proto::JOB_PHASE_RUNNING);
  return grpc::Status::OK;
}

grpc::Status FakeCoordinator::Heartbeat(grpc::ServerContext*, const proto::HeartbeatRequest*,
                                        proto::HeartbeatResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  ++heartbeats_;
  response->set_phase(proto::JOB_PHASE_RUNNING);
  response->set_lease_seconds(30);
  return grpc::Status::OK;
}

grpc::Status FakeCoordinator::NextTask(grpc::ServerContext*, const proto::NextTaskRequest*,
                                       proto::NextTaskResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) {
    response->set_outcome(proto::NextTaskResponse::JOB_FINISHED);
    response->set_reason("fake: done");
    response->set_phase(proto::JOB_PHASE_SUCCEEDED);
    return grpc::Status::OK;
  }
  task_given_ = true;
  response->set_outcome(proto::NextTaskResponse::ASSIGNED);
  *response->mutable_task() = task_;
  response->set_phase(proto::JOB_PHASE_RUNNING);
  return grpc::Status::OK;
}

grpc::Status FakeCoordinator::CompleteTask(grpc::ServerContext*,
                                           const proto::CompleteTaskRequest* request,
                                           proto::CompleteTaskResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  if (request->task_id() != task_.task_id()) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "fake: not your task");
  }
  ++completions_;
  last_completion_ = *request;
  finished_ = true;
  response->set_phase(proto::JOB_PHASE_SUCCEEDED);
  return grpc::Status::OK;
}

grpc::Status FakeCoordinator::Leave(grpc::ServerContext*, const proto::LeaveRequest* request,
                                    proto::LeaveResponse*) {
  std::lock_guard<std::mutex> lock(mu_);
  leave_reason_ = request->reason();
  leave_message_ = request->message();
  return grpc::Status::OK;
}

grpc::Status FakeCoordinator::ReportEvaluation(grpc::ServerContext*,
                                               const proto::ReportEvaluationRequest* request,
                                               proto::ReportEvaluationResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  evaluations_.push_back(*request);
  response->set_phase(phase_after_evaluation_);
  return grpc::Status::OK;
}

grpc::Status FakeCoordinator::Status(grpc::ServerContext*, const proto::CoordinatorStatusRequest*,
                                     proto::CoordinatorStatusResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  response->set_phase(finished_ ? proto::JOB_PHASE_SUCCEEDED : proto::JOB_PHASE_RUNNING);
  return grpc::Status::OK;
}

}  // namespace gaptrain
