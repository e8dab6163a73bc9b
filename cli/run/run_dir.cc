#include "cli/run/run_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/run/prometheus_targets.h"
#include "services/base/atomic_file.h"
#include "services/base/os_error.h"

namespace gaptrain {
namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::string ErrnoText() { return std::strerror(errno); }

std::string UtcStamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y%m%d-%H%M%S", &tm);
  return text;
}

Status WriteText(const std::string& path, const std::string& text) {
  return WriteFileAtomically(path, text.data(), text.size());
}

}  // namespace

Status RunDir::Open(const std::string& given_path, bool resume, std::string* moved_to,
                    std::unique_ptr<RunDir>* dir) {
  moved_to->clear();
  // "runs/job/" is "runs/job": else the previous run would be moved aside
  // into itself ("runs/job/-<time>"), which rename refuses.
  std::string path = given_path;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  if (Exists(path)) {
    // Only the lock tells whether a launcher still runs here.
    const int probe = open((path + "/lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (probe >= 0 && flock(probe, LOCK_EX | LOCK_NB) != 0) {
      close(probe);
      return Status::FailedPrecondition(path + ": another 'gaptrain run' is running this job " +
                                        "(see 'gaptrain status --run-dir " + path + "')");
    }
    if (probe >= 0) close(probe);
    if (!resume) {
      std::string aside = path + "-" + UtcStamp();
      for (int i = 2; Exists(aside); ++i) aside = path + "-" + UtcStamp() + "." + std::to_string(i);
      if (std::rename(path.c_str(), aside.c_str()) != 0) {
        return Status::Unavailable("cannot move the previous run " + path + " to " + aside +
                                   ": " + ErrnoText());
      }
      *moved_to = aside;
    }
  } else if (resume) {
    return Status::NotFound(path + ": no previous run to resume");
  }
  GAPTRAIN_RETURN_IF_ERROR(MakeDirs(path));
  const int lock_fd = open((path + "/lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd < 0) return Status::Unavailable("cannot open " + path + "/lock: " + ErrnoText());
  if (flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    close(lock_fd);
    return Status::FailedPrecondition(path + ": another 'gaptrain run' is running this job");
  }
  dir->reset(new RunDir(path, lock_fd));
  return Status::OK();
}

RunDir::~RunDir() {
  std::remove((path_ + "/endpoints.json").c_str());
  close(lock_fd_);
}

Status RunDir::Token(std::string* token) {
  const std::string file = path_ + "/token";
  {
    std::ifstream in(file);
    std::string stored;
    if (in >> stored && !stored.empty()) {
      *token = stored;
      return Status::OK();
    }
  }
  unsigned char bytes[16];
  std::ifstream random("/dev/urandom", std::ios::binary);
  if (!random.read(reinterpret_cast<char*>(bytes), sizeof bytes)) {
    return Status::Unavailable("cannot read /dev/urandom for the job token");
  }
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char b : bytes) {
    hex += kHex[b >> 4];
    hex += kHex[b & 15];
  }
  const int fd = open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::Unavailable("cannot write " + file + ": " + ErrnoText());
  const std::string line = hex + "\n";
  const bool ok = write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  close(fd);
  if (!ok) return Status::Unavailable("cannot write " + file);
  *token = hex;
  return Status::OK();
}

Status RunDir::StoreManifest(const std::string& yaml_text, std::string* stored_path) {
  *stored_path = path_ + "/job.yaml";
  return WriteText(*stored_path, yaml_text);
}

Status RunDir::WriteEndpoints(const std::string& job_name, LocalJob* job, pid_t launcher) {
  nlohmann::json endpoints;
  endpoints["launcherPid"] = launcher;
  endpoints["master"] = job->master_address();  // shard 0's
  if (job->master_count() > 1) {
    nlohmann::json shards = nlohmann::json::array();
    for (size_t i = 0; i < job->master_count(); ++i) shards.push_back(job->master_address(i));
    endpoints["masters"] = shards;
  }
  endpoints["coordinator"] = job->coordinator_address();
  nlohmann::json metrics = nlohmann::json::object();
  const std::vector<LocalJob::MetricsTarget> targets = job->targets();
  for (const LocalJob::MetricsTarget& t : targets) {
    metrics[t.service] = "http://" + t.address + "/metrics";
  }
  endpoints["metrics"] = metrics;
  nlohmann::json pids = nlohmann::json::object();
  auto add_pid = [&pids](const std::string& service, Process* p) {
    if (p != nullptr && p->Running()) pids[service] = p->pid();
  };
  for (size_t i = 0; i < job->master_count(); ++i) add_pid(job->MasterName(i), job->master(i));
  add_pid("coordinator", job->coordinator());
  add_pid("evaluator", job->evaluator());
  for (size_t i = 0; i < job->trainer_count(); ++i) {
    add_pid(LocalJob::TrainerName(i), job->trainer(i));
  }
  endpoints["pids"] = pids;
  const nlohmann::json file_sd = PrometheusTargetGroups(job_name, targets);
  GAPTRAIN_RETURN_IF_ERROR(WriteText(path_ + "/prometheus-targets.json", file_sd.dump(2) + "\n"));
  return WriteText(path_ + "/endpoints.json", endpoints.dump(2) + "\n");
}

Status RunDir::WriteSummary(const std::string& json) {
  return WriteText(path_ + "/summary.json", json);
}

Status ReadRunEndpoints(const std::string& run_dir, std::string* coordinator_address,
                        std::string* token) {
  const std::string file = run_dir + "/endpoints.json";
  std::ifstream in(file);
  if (!in) {
    return Status::NotFound(file + ": no job is running there (start one with 'gaptrain run -f')");
  }
  const nlohmann::json endpoints = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!endpoints.is_object() || !endpoints.contains("coordinator") ||
      !endpoints["coordinator"].is_string()) {
    return Status::DataLoss(file + ": coordinator: missing or not a string");
  }
  *coordinator_address = endpoints["coordinator"].get<std::string>();
  std::ifstream token_in(run_dir + "/token");
  if (!(token_in >> *token)) return Status::NotFound(run_dir + "/token: missing or empty");
  return Status::OK();
}

std::string DataCacheDir(const std::string& flag, const char* xdg_cache_home, const char* home,
                         const std::string& run_dir) {
  if (flag == "none") return "";
  if (!flag.empty()) return flag;
  // The spec: a relative $XDG_CACHE_HOME is invalid and ignored.
  if (xdg_cache_home != nullptr && xdg_cache_home[0] == '/') {
    return std::string(xdg_cache_home) + "/gaptrain/data";
  }
  if (home != nullptr && home[0] == '/') return std::string(home) + "/.cache/gaptrain/data";
  return run_dir + "/data-cache";
}

}  // namespace gaptrain
