// CreateWorkerChannel: a gRPC channel from a worker to the master or the
// coordinator. After a failure, gRPC's channel refuses calls ("failed to
// connect", fast) until its own reconnection backoff lets it try again,
// and that backoff grows to two minutes by default, so a worker whose
// master restarted could sit idle long after it is back (measured here:
// 4-6 s for a master that was down 0.5 s, with a 2 s cap). These channels
// try again after 100 ms, growing to at most 500 ms; the worker's
// RetryLoop paces the calls. Channels to the master also get the HTTP/2
// settings for model-sized streams (ApplyBulkTransferArguments).

#ifndef GAPTRAIN_SERVICES_WORKER_WORKER_CHANNEL_H_
#define GAPTRAIN_SERVICES_WORKER_WORKER_CHANNEL_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

namespace gaptrain {

enum class ChannelKind { kMaster, kCoordinator };

std::shared_ptr<grpc::Channel> CreateWorkerChannel(
    const std::string& target, std::shared_ptr<grpc::ChannelCredentials> credentials,
    ChannelKind kind);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_WORKER_WORKER_CHANNEL_H_
