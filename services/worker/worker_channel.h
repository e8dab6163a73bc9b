// CreateWorkerChannel: a gRPC channel from a worker to the master or the
// coordinator. After a failure, gRPC's channel refuses calls ("failed to
// connect", fast) until its own reconnection backoff lets it try again,
// and that backoff grows to two minutes by default, so a worker whose
// master restarted could sit idle long after it is back (measured here:
// 4-6 s for a master that was down 0.5 s, with a 2 s cap). These channels
// try again after 100 ms, growing to at most 500 ms, and ping their server
// every 2 s, so a peer cut off without a FIN is noticed within about 4 s,
// and look the server's name up again at most every 0.5 s
// (services/net/grpc_keepalive.h); the worker's RetryLoop paces the
// calls. The clients make their channels again while calls keep failing
// (services/net/channel_renewal.h): a master or coordinator that came
// back at a new address behind its name (a new pod behind a Kubernetes
// Service) is reached within a second or so of serving. Channels to the
// master also get the HTTP/2 settings for model-sized streams
// (ApplyBulkTransferArguments).
//
// MasterConnector: how a worker of a job makes its MasterClients (the
// trainer's and the evaluator's): such channels, the job token, and the
// job's spec.training.wireType for the values a trainer pulls and pushes.
// The evaluator always pulls fp32: it scores the model that checkpoints
// and `gaptrain export` hold, not its bf16 rounding.

#ifndef GAPTRAIN_SERVICES_WORKER_WORKER_CHANNEL_H_
#define GAPTRAIN_SERVICES_WORKER_WORKER_CHANNEL_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "proto/gaptrain.pb.h"
#include "services/api/training_job.h"
#include "services/base/status.h"
#include "services/worker/master_link.h"

namespace gaptrain {

enum class ChannelKind { kMaster, kCoordinator };

std::shared_ptr<grpc::Channel> CreateWorkerChannel(
    const std::string& target, std::shared_ptr<grpc::ChannelCredentials> credentials,
    ChannelKind kind);

// The wire type named by a manifest's spec.training.wireType ("fp32" or
// "bf16"); anything else is INVALID_ARGUMENT naming the field.
Status ParseWireType(const std::string& name, proto::WireType* type);

enum class MasterRole { kTrainer, kEvaluator };

// A connector for a worker of `job` in `role`: CreateWorkerChannel(kMaster)
// with `credentials`, `token` on every call, `deadline_seconds` per call,
// and the wire type above.
Status MasterConnector(const TrainingJob& job, MasterRole role, const std::string& token,
                       double deadline_seconds,
                       std::shared_ptr<grpc::ChannelCredentials> credentials,
                       MasterLink::Connector* connector);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_WORKER_WORKER_CHANNEL_H_
