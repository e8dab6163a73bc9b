// CoordinatorSession: one worker's membership in the job as the
// coordinator sees it (docs/coordinator.md, "A worker's loop"):
// registration, registering again with the previous id when the lease was
// lost or the coordinator forgot the worker, heartbeats carrying the
// progress the training loop reports, and the verbs, every one retried
// through a RetryLoop.
//
// What callers may rely on:
//   - Register() returns once registered; or with the coordinator's error
//     when it refuses (FAILED_PRECONDITION: the job has finished, in which
//     case the stop flag is set with kJobEnded), or when the stop flag ends
//     the retries. ALREADY_EXISTS (a previous evaluator's lease has not run
//     out yet) is retried.
//   - The heartbeat thread keeps the lease while the caller computes or
//     waits for the master; it retries on its own. A reply saying the job
//     succeeded or failed sets the stop flag (kJobEnded).
//   - When the session had to register again and got a NEW id (its lease
//     had expired, so the coordinator took its task back), generation()
//     grows and the caller must drop its task. Registering again with the
//     same id (resumed) changes nothing.
//   - Network faults never surface as crashes: they are retried with
//     backoff; each recovery counts one reconnect{service="coordinator"}.
//   - StopHeartbeats() returns at once: a heartbeat in flight is cancelled
//     (one stuck on a coordinator that vanished would hold it for up to
//     its deadline). Leave() tries only until its deadline, every attempt
//     included.
//   - Thread-safe. The client must outlive the session.

#ifndef GAPTRAIN_SERVICES_WORKER_COORDINATOR_SESSION_H_
#define GAPTRAIN_SERVICES_WORKER_COORDINATOR_SESSION_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "proto/gaptrain.pb.h"
#include "services/base/status.h"
#include "services/coordinator/coordinator_client.h"
#include "services/net/call_canceller.h"
#include "services/worker/retry.h"
#include "services/worker/stop_flag.h"
#include "services/worker/worker_metrics.h"

namespace gaptrain {

class CoordinatorSession {
 public:
  using Clock = std::chrono::steady_clock;

  struct Options {
    std::string host;
    proto::WorkerRole role = proto::WORKER_ROLE_TRAINER;
    RetryPolicy retry;
    uint64_t seed = 1;  // of the backoff jitter
    // Heartbeat period: a third of the lease the coordinator gives, or
    // this when it is shorter (0: no bound).
    double heartbeat_seconds = 0;
  };

  // `metrics` may be null.
  CoordinatorSession(CoordinatorClient* client, Options options, StopFlag* stop,
                     WorkerMetrics* metrics);
  ~CoordinatorSession();  // stops the heartbeats
  CoordinatorSession(const CoordinatorSession&) = delete;
  CoordinatorSession& operator=(const CoordinatorSession&) = delete;

  Status Register();
  // The last registration reply: id, master address, data, lease.
  proto::RegisterResponse registration() const;
  uint32_t worker_id() const;
  uint64_t generation() const;

  void StartHeartbeats();
  void StopHeartbeats();
  // Sends the next heartbeat now rather than at its period: the master
  // said the job's length is reached, which the coordinator learns from
  // the version a heartbeat reports (its answer then ends the job).
  void HeartbeatNow();
  // The heartbeat period: a third of the registration's lease (0.2-10 s),
  // or Options::heartbeat_seconds when shorter.
  std::chrono::milliseconds HeartbeatPeriod() const;
  // What the next heartbeat reports. `task_id` 0: none.
  void SetProgress(uint64_t task_id, uint32_t samples_done, std::optional<float> loss);
  void SetMasterVersion(uint64_t version);
  // A restarted master's version, which may be lower than any seen.
  void ResetMasterVersion(uint64_t version);

  Status NextTask(proto::NextTaskResponse* response);
  // *credited is false when the coordinator no longer had this worker
  // holding the task (its lease had expired): the work stays pushed, the
  // task is someone else's. `report` carries where the task's pushes
  // landed and what was retrained (its worker and task ids are set here).
  Status CompleteTask(uint64_t task_id, const proto::CompleteTaskRequest& report, bool* credited);
  // *phase: the job's phase after the report.
  Status ReportEvaluation(double accuracy, double loss, uint64_t version, proto::JobPhase* phase);
  // The graceful exit; stops the heartbeats first. Best effort until
  // `deadline`, which bounds each attempt too: a worker already gone is
  // fine. DEADLINE_EXCEEDED or UNAVAILABLE when the coordinator could not
  // be reached in time.
  Status Leave(proto::LeaveReason reason, const std::string& message, Clock::time_point deadline);

 private:
  // Runs `call` with the current id: transient failures are retried with
  // backoff; FAILED_PRECONDITION or NOT_FOUND (this worker is no longer
  // live, or the coordinator forgot it) registers again and retries.
  Status Call(const char* verb, const std::function<Status(uint32_t id)>& call);
  // Registers again with `old_id` as the previous id, unless another thread
  // already did. A refusal because the job ended sets the stop flag.
  Status Reregister(uint32_t old_id);
  // After a refused registration: whether the job has ended (then the stop
  // flag is set).
  bool CheckJobEnded();
  void NoteFailure(const char* verb, const Status& status);
  void NoteSuccess();
  void HeartbeatLoop();
  uint64_t NextSeed();

  CoordinatorClient* const client_;
  const Options options_;
  StopFlag* const stop_;
  WorkerMetrics* const metrics_;

  std::mutex register_mu_;  // one registration at a time
  mutable std::mutex mu_;
  proto::RegisterResponse registration_;
  uint32_t id_ = 0;
  uint64_t generation_ = 0;
  uint64_t seed_counter_ = 0;
  bool failing_ = false;     // the last call failed on the network
  int failures_logged_ = 0;  // in the current outage
  proto::HeartbeatRequest progress_;

  std::mutex hb_mu_;
  std::condition_variable hb_cv_;
  bool hb_stop_ = false;
  bool hb_now_ = false;  // HeartbeatNow() was called
  std::thread heartbeats_;
  CallCanceller hb_calls_;  // the heartbeat in flight, cancelled on stop
};

// How a trainer or the evaluator leaves once its loop ended with `status`:
// FAILED on an error, PREEMPTED after a SIGTERM (until LeaveDeadline),
// FINISHED otherwise; 10 s to reach the coordinator but after a SIGTERM.
// (python/gaptrain/job_role.py's leave_terms is the same rule.)
struct LeaveTerms {
  proto::LeaveReason reason = proto::LEAVE_REASON_FINISHED;
  CoordinatorSession::Clock::time_point deadline;
};
LeaveTerms LeaveTermsAfter(const Status& status, const StopFlag& stop, double grace_seconds);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_WORKER_COORDINATOR_SESSION_H_
