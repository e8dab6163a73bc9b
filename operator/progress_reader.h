// ProgressReader: reads what a running TrainingJob's coordinator and master
// report (the coordinator's GET /status, the master's GET /metrics) from
// their pods' IPs, as docs/operator.md ("What the operator creates") says:
// pod-to-pod networking, no DNS, short timeouts. It keeps each job's
// previous master scrape, so the status shows the mean Gap and staleness of
// recent pushes and the update rate between two readings (observed_job.h's
// ProgressBetween).
//
// What callers may rely on:
//   - Read() fills observed->coordinator, observed->master and
//     observed->master_scrape (the master's totals as read, with the time
//     of the read) from the pods in observed->pods: the job's (controlled
//     by its uid) running NAME-coordinator and NAME-master with a
//     status.podIP. With several master shards (spec.master.shards) the
//     totals are every shard's as the coordinator's /status lists them
//     (observed_job.h's ScrapeOfShards), and no master is asked. A pod that is
//     missing, not running, unreachable within the timeout, or answering
//     something that does not parse leaves its reading absent; the reason
//     goes to *problems (for a log line), never to the caller as an error.
//     /status is asked with the job's status token (its annotation
//     gaptrain.io/status-token) when it has one.
//   - The previous scrape is kept per job key (replaced once a newer one
//     is at least a second later) and belongs to one job uid:
//     a job deleted and created again under the same name starts afresh.
//     Forget(key) drops it (the job is gone).
//   - Thread-safe: reconciles of different jobs read concurrently.

#ifndef GAPTRAIN_OPERATOR_PROGRESS_READER_H_
#define GAPTRAIN_OPERATOR_PROGRESS_READER_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "operator/trainingjob/desired_children.h"
#include "operator/trainingjob/observed_job.h"

namespace gaptrain {

class ProgressReader {
 public:
  struct Options {
    double timeout_seconds = 2;  // per request, connecting included
    // The pods' HTTP ports (tests serve both on ephemeral ports).
    uint16_t coordinator_port = trainingjob::kCoordinatorHttpPort;
    uint16_t master_port = trainingjob::kMasterHttpPort;
  };

  ProgressReader() = default;
  explicit ProgressReader(const Options& options) : options_(options) {}

  void Read(const std::string& job_key, trainingjob::ObservedJob* observed,
            std::vector<std::string>* problems);
  void Forget(const std::string& job_key);

 private:
  struct Previous {
    std::string job_uid;
    trainingjob::MasterScrape scrape;
  };

  const Options options_;
  std::mutex mu_;
  std::map<std::string, Previous> previous_;  // by job key
};

}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_PROGRESS_READER_H_
