// The run directory of a local job, runs/<job name>/ by default: what
// `gaptrain run` leaves for the user and for `gaptrain status`.
//
//   job.yaml                 the manifest as run (every process reads this copy)
//   token                    the job token (mode 0600)
//   lock                     flock'ed by the running launcher
//   endpoints.json           the running services' addresses, metrics URLs
//                            and process ids, rewritten on every restart;
//                            removed when the launcher exits
//   prometheus-targets.json  the /metrics endpoints in Prometheus's
//                            file_sd_configs format, rewritten likewise
//   summary.json             the run's outcome, written at the end
//   logs/ ports/ coordinator/ checkpoints/   see local_job.h

#ifndef GAPTRAIN_CLI_RUN_RUN_DIR_H_
#define GAPTRAIN_CLI_RUN_RUN_DIR_H_

#include <string>
#include <vector>

#include "cli/run/local_job.h"
#include "services/base/status.h"

namespace gaptrain {

class RunDir {
 public:
  // Makes `path` ready for a run and locks it. With `resume`, an existing
  // run's state (coordinator state, checkpoints, token) is kept and the job
  // continues where it stopped. Without it, an existing directory is moved
  // aside to `path`-<UTC time> (reported in *moved_to), so nothing stored is
  // lost, and a fresh one is made. FAILED_PRECONDITION when another
  // launcher holds the lock.
  static Status Open(const std::string& path, bool resume, std::string* moved_to,
                     std::unique_ptr<RunDir>* dir);
  ~RunDir();  // releases the lock, removes endpoints.json

  const std::string& path() const { return path_; }

  // The job token: the stored one when resuming, else a new random one.
  Status Token(std::string* token);
  // Copies the manifest to job.yaml; returns its path.
  Status StoreManifest(const std::string& yaml_text, std::string* stored_path);

  // endpoints.json and prometheus-targets.json for the processes of `job`
  // (the TrainingJob `job_name`) that run now.
  Status WriteEndpoints(const std::string& job_name, LocalJob* job, pid_t launcher);
  Status WriteSummary(const std::string& json);

 private:
  RunDir(std::string path, int lock_fd) : path_(std::move(path)), lock_fd_(lock_fd) {}

  std::string path_;
  int lock_fd_;
};

// The workers' data cache (services/learn/inflated_cache.h) for
// `gaptrain run --data-cache FLAG`: FLAG itself; "" for "none"; when FLAG is
// empty, the user's cache directory as the XDG base-directory spec puts it
// ($XDG_CACHE_HOME/gaptrain/data, else $HOME/.cache/gaptrain/data), shared
// by every run, and when neither variable is set, <run dir>/data-cache.
std::string DataCacheDir(const std::string& flag, const char* xdg_cache_home, const char* home,
                         const std::string& run_dir);

// Where `gaptrain status` finds a running job: the coordinator's address
// from <run dir>/endpoints.json and the token from <run dir>/token.
// NOT_FOUND (naming the file) when no launcher runs there.
Status ReadRunEndpoints(const std::string& run_dir, std::string* coordinator_address,
                        std::string* token);

}  // namespace gaptrain

#endif  // GAPTRAIN_CLI_RUN_RUN_DIR_H_
