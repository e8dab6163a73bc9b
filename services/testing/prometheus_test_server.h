// PrometheusTestServer: a real Prometheus server (Debian's `prometheus`
// binary) run as a child process for tests, listening on a free loopback
// port and scraping the given targets. It lets a test check that what a
// service exposes on /metrics is what Prometheus actually ingests, by
// querying Prometheus's HTTP API.
//
// What callers may rely on:
//   - Start() returns only once Prometheus answers 200 on /-/ready, or an
//     error that says why (binary missing: FAILED_PRECONDITION naming the
//     path and the package; early exit: UNAVAILABLE with the tail of its
//     log). It never skips silently.
//   - The binary is $GAPTRAIN_PROMETHEUS_BINARY when set, else
//     /usr/bin/prometheus, else `prometheus` on $PATH.
//   - Its config, data and log live in a fresh directory under $TEST_TMPDIR
//     (/tmp outside Bazel), removed by the destructor.
//   - The destructor stops the child (SIGTERM, SIGKILL after a bounded
//     wait) and reaps it. The child is also killed if the thread that
//     called Start() dies (PR_SET_PDEATHSIG), so no Prometheus outlives the
//     test; call Start() from a thread that lives as long as the server.
//   - Methods are not thread-safe; use one instance from one thread.

#ifndef GAPTRAIN_SERVICES_TESTING_PROMETHEUS_TEST_SERVER_H_
#define GAPTRAIN_SERVICES_TESTING_PROMETHEUS_TEST_SERVER_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "services/base/status.h"

namespace gaptrain {

class PrometheusTestServer {
 public:
  // Starts Prometheus scraping `targets` ("127.0.0.1:PORT", path /metrics)
  // every `scrape_interval_seconds` (at least 0.001; the scrape timeout
  // equals the interval), and waits up to 30 s for it to become ready.
  static Status Start(const std::vector<std::string>& targets,
                      double scrape_interval_seconds,
                      std::unique_ptr<PrometheusTestServer>* server);

  // Like Start(), with the targets read from a Prometheus file_sd file
  // (JSON: [{"targets": [...], "labels": {...}}]), re-read within a second
  // of every change, so targets may come and go while it runs; the file
  // may not exist yet. `file_sd_path` is absolute. Labels in the file (e.g.
  // job) are kept.
  static Status StartWithFileTargets(const std::string& file_sd_path,
                                     double scrape_interval_seconds,
                                     std::unique_ptr<PrometheusTestServer>* server);

  // What else a file_sd server may do.
  struct FileTargetsOptions {
    double scrape_interval_seconds = 1;
    // Rule files (absolute paths) loaded at the start and evaluated every
    // scrape interval; a file Prometheus refuses fails Start().
    std::vector<std::string> rule_files;
    // A YAML list of relabel_configs applied to the targets, as in a scrape
    // config (each item starts "- "); empty: none.
    std::string relabel_configs;
  };
  static Status StartWithFileTargets(const std::string& file_sd_path,
                                     const FileTargetsOptions& options,
                                     std::unique_ptr<PrometheusTestServer>* server);

  // The binary Start() runs (see the file comment); may not exist.
  static std::string BinaryPath();

  PrometheusTestServer(const PrometheusTestServer&) = delete;
  PrometheusTestServer& operator=(const PrometheusTestServer&) = delete;
  ~PrometheusTestServer();

  // Prometheus's web port on 127.0.0.1.
  uint16_t port() const { return port_; }

  // The child's process id (for tests of this class).
  pid_t pid() const { return pid_; }

  // Runs an instant query (GET /api/v1/query) and returns the response
  // body, Prometheus's JSON. An HTTP error (e.g. a PromQL syntax error,
  // 400) is INVALID_ARGUMENT with Prometheus's message.
  Status Query(const std::string& promql, std::string* json);

  // Runs a range query (GET /api/v1/query_range) from `start` to `end`
  // (Unix seconds) every `step_seconds`; errors as Query().
  Status QueryRange(const std::string& promql, double start, double end, double step_seconds,
                    std::string* json);

  // GET /api/v1/<path> with the query parameters `params` (URL-encoded
  // here; a name may repeat, as match[] does), e.g. ("targets", {}) or
  // ("label/pod/values", {{"match[]", "up"}}). The body, Prometheus's JSON;
  // HTTP 400 and 422 are INVALID_ARGUMENT, other errors UNAVAILABLE.
  Status Api(const std::string& path,
             const std::vector<std::pair<std::string, std::string>>& params, std::string* json);

  // Polls Query(promql) until it returns a non-empty vector (or a scalar)
  // and sets *value to the first sample's value. DEADLINE_EXCEEDED after
  // `timeout_seconds`, with the last answer; a query Prometheus rejects
  // fails at once.
  Status WaitForSeries(const std::string& promql, double timeout_seconds,
                       double* value);

  // The last `max_bytes` of Prometheus's stdout and stderr, for messages.
  std::string LogTail(size_t max_bytes = 4096) const;

 private:
  PrometheusTestServer() = default;

  // Writes a config with one scrape job whose target section (YAML, indented
  // for the job) is `scrape`, then starts and waits as Start() does.
  static Status StartWithScrapeConfig(const std::string& scrape,
                                      double scrape_interval_seconds,
                                      const std::vector<std::string>& rule_files,
                                      std::unique_ptr<PrometheusTestServer>* server);

  // Forks and execs the binary listening on port_; sets pid_.
  Status Spawn(const std::string& binary);
  // Polls /-/ready until 200, the child exits, or the deadline passes.
  // Sets *address_in_use when the child exited because port_ was taken.
  Status WaitUntilReady(double timeout_seconds, bool* address_in_use);
  // SIGTERM, bounded wait, SIGKILL; reaps. No-op without a child.
  void KillChild();

  std::string dir_;  // temp dir: prometheus.yml, data/, prometheus.log
  std::string data_dir_;
  std::string config_path_;
  std::string log_path_;
  uint16_t port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_TESTING_PROMETHEUS_TEST_SERVER_H_
