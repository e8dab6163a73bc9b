// MasterClient: a worker's (or a test's) typed view of the master's gRPC
// API. It splits pushes into chunks, reassembles pulls into a flat buffer,
// and attaches the job token to every call. Buffers passed to Pull and
// Push are used in place for the duration of the call. Errors come back as Status
// with the server's code and message. Made with a ChannelFactory, it makes
// its channel again while calls keep failing on the network
// (ChannelRenewal: a master back at a new address behind a name that did
// not resolve meanwhile is found within a second or so). Thread-compatible:
// one client per thread, or external locking.

#ifndef GAPTRAIN_SERVICES_MASTER_MASTER_CLIENT_H_
#define GAPTRAIN_SERVICES_MASTER_MASTER_CLIENT_H_

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "proto/gaptrain.grpc.pb.h"
#include "services/base/status.h"
#include "services/net/channel_renewal.h"

namespace gaptrain {

class MasterClient {
 public:
  struct Options {
    std::string token;
    proto::WireType wire_type = proto::FLOAT32;  // pulls and gradients
    uint32_t chunk_values = 256 * 1024;
    double deadline_seconds = 60;  // per call
  };

  // A channel to the master; the same target, credentials and arguments
  // every time.
  using ChannelFactory = std::function<std::shared_ptr<grpc::Channel>()>;

  // Every call goes over `channel`.
  MasterClient(std::shared_ptr<grpc::Channel> channel, Options options);
  // Calls go over a channel from `make_channel`, made again as above.
  MasterClient(ChannelFactory make_channel, Options options);

  Status Describe(proto::DescribeResponse* response);

  struct PullResult {
    uint64_t version = 0;
    bool modified = false;  // false: `out` is untouched, the known version is current
    uint64_t incarnation = 0;  // the master run that answered (0: unknown)
  };
  // Writes the parameters into out[0, n) unless `known_version` (-1: none)
  // is current. n must be the model's size.
  Status Pull(uint32_t worker, int64_t known_version, float* out, size_t n, PullResult* result);

  // The same for θ itself, read-only (an observer pull: DANA's look-ahead
  // is not applied, no membership is needed, nothing is recorded): what
  // the evaluator evaluates.
  Status PullModel(int64_t known_version, float* out, size_t n, PullResult* result);

  // Sends a gradient of n values computed on `base_version`; `echo`
  // (optional, n values of `echo_type`) is the worker's copy for
  // gapSource echo.
  Status Push(uint32_t worker, uint64_t base_version, const float* gradient, size_t n,
              float loss, proto::PushResponse* response, const void* echo = nullptr,
              proto::WireType echo_type = proto::FLOAT32);

  // Push, then the parameters for the next step in the same call (one
  // round trip instead of two). Returns the push's status, as Push does.
  // When it is OK, `result->push` is the push's outcome and
  // `result->pull_status` the pull's: OK, with `result->pull` saying
  // whether `parameters` (n values) were written; otherwise `parameters`
  // may hold part of a reply. `parameters` may be the buffer `echo`
  // points at: it is written only after the whole push has gone.
  // UNIMPLEMENTED from a master without PushPull: nothing was applied.
  struct PushPullResult {
    proto::PushResponse push;
    PullResult pull;
    Status pull_status;
  };
  Status PushPull(uint32_t worker, uint64_t base_version, const float* gradient, size_t n,
                  float loss, const void* echo, proto::WireType echo_type, float* parameters,
                  PushPullResult* result);

  Status SetMembers(const std::vector<uint32_t>& workers, proto::SetMembersResponse* response);
  Status Checkpoint(proto::CheckpointResponse* response);
  // The module's buffers, packed as Describe's layout.buffers say: a
  // member's own to the master, and the master's back.
  Status PushBuffers(uint32_t worker, const std::string& values,
                     proto::PushBuffersResponse* response = nullptr);
  Status PullBuffers(proto::PullBuffersResponse* response);
  // spec.model.fromTrainer: declares the model (`layout`'s tensors and
  // buffers, the parameters' initial `values`, the buffers' packed values),
  // in chunks of the client's chunk size. *adopted: it became the job's.
  Status DeclareModel(uint32_t worker, const proto::ModelLayout& layout,
                      const std::vector<float>& values, const std::string& buffer_values,
                      bool* adopted);

 private:
  void Prepare(grpc::ClientContext* context) const;
  Status PullImpl(uint32_t worker, bool observer, int64_t known_version, float* out, size_t n,
                  PullResult* result);
  // Every public call's outcome passes here: renews the channel when it is
  // time, and returns `outcome`.
  Status Observe(Status outcome);
  void UseChannel(const std::shared_ptr<grpc::Channel>& channel);

  const ChannelFactory make_channel_;  // null: the channel is fixed
  ChannelRenewal renewal_;
  std::unique_ptr<proto::Master::Stub> stub_;
  // Pull and Push go through raw byte buffers (chunk_wire.h): values are
  // decoded straight from received slices into the caller's buffer and
  // sent as slices of the caller's gradient, with no protobuf copies.
  std::unique_ptr<grpc::GenericStub> generic_;
  Options options_;
};

Status FromGrpcStatus(const grpc::Status& status);

// A channel to the master at `target` ("host:port") with the HTTP/2
// settings for model-sized transfers (ApplyBulkTransferArguments).
std::shared_ptr<grpc::Channel> CreateMasterChannel(
    const std::string& target, std::shared_ptr<grpc::ChannelCredentials> credentials);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_MASTER_MASTER_CLIENT_H_
