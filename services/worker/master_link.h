// MasterLink: a worker's connection to the master the coordinator named:
// the client, what Describe said about the job (rule, echo needs), checked
// against the worker's own model, and the bookkeeping of master outages:
// rate-limited logs, the reconnect metric, and restarts noticed as
// versions going backwards.
//
// What callers may rely on:
//   - Connect() makes a new client only when the address changed, and
//     succeeds only when the master's model layout equals the worker's;
//     a different layout is FAILED_PRECONDITION naming the first
//     difference (a worker built for another job must not push).
//   - client() is valid after a successful Connect() until the next one.
//   - Not thread-safe: one training or evaluation loop owns it.

#ifndef GAPTRAIN_SERVICES_WORKER_MASTER_LINK_H_
#define GAPTRAIN_SERVICES_WORKER_MASTER_LINK_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "proto/gaptrain.pb.h"
#include "services/base/status.h"
#include "services/engine/buffer_layout.h"
#include "services/engine/parameter_layout.h"
#include "services/master/master_client.h"
#include "services/worker/retry.h"
#include "services/worker/worker_metrics.h"

namespace gaptrain {

class MasterLink {
 public:
  // Makes a client for a master at "host:port" (credentials, token and
  // deadlines are the connector's business).
  using Connector = std::function<std::unique_ptr<MasterClient>(const std::string& address)>;

  // `metrics` may be null.
  MasterLink(Connector connect, WorkerMetrics* metrics);

  // Connects to `address` and checks the master's model against `layout`
  // and its module buffers against `buffers`. Transient failures are
  // retried through `loop`.
  Status Connect(const std::string& address, const ParameterLayout& layout,
                 const BufferLayout& buffers, RetryLoop* loop);

  MasterClient* client() { return client_.get(); }
  const std::string& address() const { return address_; }
  const proto::DescribeResponse& description() const { return description_; }
  // The master run that answered the last Connect(): its id and what it
  // resumed from. Connect() again to the same address to learn a new one.
  const proto::MasterIncarnation& run() const { return description_.incarnation(); }

  // A failed call: logged at the first failure of an outage and every
  // tenth after.
  void NoteFailure(const char* verb, const Status& status);
  // A successful call: counts a reconnect after failures.
  void NoteSuccess();
  // The version of a pull: a version below the highest one seen means the
  // master restarted, from a checkpoint or, before its first one, from the
  // initial model (logged once per restart).
  void NoteVersion(uint64_t version);
  uint64_t highest_version() const { return highest_version_; }

 private:
  Connector connect_;
  WorkerMetrics* const metrics_;
  std::unique_ptr<MasterClient> client_;
  std::string address_;
  proto::DescribeResponse description_;
  bool failing_ = false;
  int failures_logged_ = 0;
  uint64_t highest_version_ = 0;
};

// The first difference between the master's layout and the worker's, or
// "" when they are equal.
std::string LayoutDifference(const ParameterLayout& master, const ParameterLayout& worker);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_WORKER_MASTER_LINK_H_
