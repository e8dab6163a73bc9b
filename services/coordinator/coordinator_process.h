// CoordinatorProcess: a running gaptrain-coordinator. It wires the pieces:
// the CoordinatorState, restored from --state-dir or created for the job;
// the gRPC CoordinatorService with the standard health service and TLS
// when configured; the state file, written before replies that change it
// and every few seconds for heartbeat progress; the membership feeds to the
// masters (one per shard of θ); a TickTimer (Boost.Asio) that ticks the core every 200 ms, which
// is what makes leases expire; /metrics, /healthz and /status over HTTP;
// and a periodic summary log. Shutdown() persists the state a last time.

#ifndef GAPTRAIN_SERVICES_COORDINATOR_COORDINATOR_PROCESS_H_
#define GAPTRAIN_SERVICES_COORDINATOR_COORDINATOR_PROCESS_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "services/api/training_job.h"
#include "services/base/status.h"
#include "services/coordinator/coordinator_metrics.h"
#include "services/coordinator/coordinator_options.h"
#include "services/coordinator/coordinator_service.h"
#include "services/coordinator/membership_feed.h"
#include "services/coordinator/tick_timer.h"
#include "services/net/http_server.h"

namespace gaptrain {

class CoordinatorProcess {
 public:
  static Status Start(const CoordinatorOptions& options, const TrainingJob& job,
                      std::unique_ptr<CoordinatorProcess>* process);
  ~CoordinatorProcess();

  int grpc_port() const { return grpc_port_; }
  uint16_t http_port() const { return http_->port(); }

  // Stops ticking and accepting calls, finishes those in flight, stops the
  // membership feed, writes the state. Idempotent.
  void Shutdown();

 private:
  CoordinatorProcess() = default;
  // Every tick: the core's Tick; every few seconds: progress to disk and,
  // less often, a summary line.
  void OnTick();

  std::shared_ptr<CoordinatorMetrics> metrics_;
  std::unique_ptr<CoordinatorService> service_;
  std::vector<std::unique_ptr<MembershipFeed>> feeds_;  // one per master shard
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<TickTimer> ticks_;
  int grpc_port_ = 0;
  uint64_t tick_count_ = 0;  // on the timer's thread only

  std::mutex mu_;
  bool stopping_ = false;
  bool shut_down_ = false;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_COORDINATOR_COORDINATOR_PROCESS_H_
