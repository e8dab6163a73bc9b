#include "services/testing/prometheus_test_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "services/base/file_contents.h"
#include "services/net/http_client.h"

namespace gaptrain {

namespace {

using Clock = std::chrono::steady_clock;

constexpr double kReadyTimeoutSeconds = 30.0;
constexpr double kHttpTimeoutSeconds = 10.0;
constexpr int kPortAttempts = 5;
// Poll period against the external process: short, and always bounded by a
// deadline.
constexpr std::chrono::milliseconds kPollPeriod{100};
constexpr std::chrono::seconds kTermGrace{10};

std::string Errno(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

Clock::time_point DeadlineAfter(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(seconds));
}

bool IsExecutable(const std::string& path) {
  return !path.empty() && ::access(path.c_str(), X_OK) == 0 &&
         !std::filesystem::is_directory(path);
}

std::string UrlEncode(const std::string& s) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// A target goes into YAML between double quotes: keep it to host:port text.
bool IsPlainTarget(const std::string& t) {
  if (t.empty()) return false;
  for (unsigned char c : t) {
    if (!std::isalnum(c) && c != '.' && c != ':' && c != '-' && c != '[' &&
        c != ']' && c != '_') {
      return false;
    }
  }
  return true;
}

// A port nobody listens on now: bind 127.0.0.1:0 and release it. Another
// process may take it before Prometheus binds; Start() retries then.
Status FindFreePort(uint16_t* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Internal(Errno("socket"));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    Status s = Status::Unavailable(Errno("cannot find a free loopback port"));
    ::close(fd);
    return s;
  }
  *port = ntohs(addr.sin_port);
  ::close(fd);
  return Status::OK();
}

// A path goes into the YAML config between double quotes.
Status CheckConfigPath(const std::string& what, const std::string& path) {
  if (path.empty() || path[0] != '/' || path.find('"') != std::string::npos) {
    return Status::InvalidArgument(what + " must be absolute and free of quotes, got '" +
                                   path + "'");
  }
  return Status::OK();
}

std::string Seconds(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g s", seconds);
  return buf;
}

// Prometheus durations take integer units: "500ms".
std::string Duration(double seconds) {
  return std::to_string(std::llround(seconds * 1000.0)) + "ms";
}

}  // namespace

std::string PrometheusTestServer::BinaryPath() {
  const char* env = std::getenv("GAPTRAIN_PROMETHEUS_BINARY");
  if (env != nullptr && *env != '\0') return env;
  const std::string debian = "/usr/bin/prometheus";
  if (IsExecutable(debian)) return debian;
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/prometheus";
    if (IsExecutable(candidate)) return candidate;
  }
  return debian;
}

Status PrometheusTestServer::Start(
    const std::vector<std::string>& targets, double scrape_interval_seconds,
    std::unique_ptr<PrometheusTestServer>* server) {
  if (targets.empty()) {
    return Status::InvalidArgument("no scrape targets");
  }
  std::string scrape = "    static_configs:\n      - targets:\n";
  for (const std::string& t : targets) {
    if (!IsPlainTarget(t)) {
      return Status::InvalidArgument("scrape target must be host:port, got '" +
                                     t + "'");
    }
    scrape += "          - \"" + t + "\"\n";
  }
  return StartWithScrapeConfig(scrape, scrape_interval_seconds, {}, server);
}

Status PrometheusTestServer::StartWithFileTargets(
    const std::string& file_sd_path, double scrape_interval_seconds,
    std::unique_ptr<PrometheusTestServer>* server) {
  FileTargetsOptions options;
  options.scrape_interval_seconds = scrape_interval_seconds;
  return StartWithFileTargets(file_sd_path, options, server);
}

Status PrometheusTestServer::StartWithFileTargets(
    const std::string& file_sd_path, const FileTargetsOptions& options,
    std::unique_ptr<PrometheusTestServer>* server) {
  GAPTRAIN_RETURN_IF_ERROR(CheckConfigPath("the file_sd path", file_sd_path));
  for (const std::string& path : options.rule_files) {
    GAPTRAIN_RETURN_IF_ERROR(CheckConfigPath("rule_files: a path", path));
  }
  // Target labels from the file (e.g. job) take precedence over the job name.
  std::string scrape = "    file_sd_configs:\n      - files: [\"" + file_sd_path +
                       "\"]\n        refresh_interval: 1s\n";
  if (!options.relabel_configs.empty()) {
    scrape += "    relabel_configs:\n";
    std::stringstream lines(options.relabel_configs);
    std::string line;
    while (std::getline(lines, line)) scrape += "      " + line + "\n";
  }
  return StartWithScrapeConfig(scrape, options.scrape_interval_seconds, options.rule_files,
                               server);
}

Status PrometheusTestServer::StartWithScrapeConfig(
    const std::string& scrape, double scrape_interval_seconds,
    const std::vector<std::string>& rule_files,
    std::unique_ptr<PrometheusTestServer>* server) {
  if (!(scrape_interval_seconds >= 0.001) ||
      !std::isfinite(scrape_interval_seconds)) {
    return Status::InvalidArgument(
        "scrape interval must be at least 0.001 s, got " +
        Seconds(scrape_interval_seconds));
  }
  const std::string binary = BinaryPath();
  if (!IsExecutable(binary)) {
    return Status::FailedPrecondition(
        "the prometheus binary is missing: '" + binary +
        "' is not an executable file. Install Debian's package "
        "(apt-get install -y --no-install-recommends prometheus) or set "
        "GAPTRAIN_PROMETHEUS_BINARY to a Prometheus 2.x binary");
  }

  std::unique_ptr<PrometheusTestServer> s(new PrometheusTestServer());
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string tmpl =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
      "/prometheus.XXXXXX";
  if (::mkdtemp(&tmpl[0]) == nullptr) {
    return Status::Internal(Errno("cannot create a temp dir " + tmpl));
  }
  s->dir_ = tmpl;
  s->data_dir_ = s->dir_ + "/data";
  s->config_path_ = s->dir_ + "/prometheus.yml";
  s->log_path_ = s->dir_ + "/prometheus.log";

  {
    const std::string interval = Duration(scrape_interval_seconds);
    std::ofstream config(s->config_path_);
    config << "global:\n"
           << "  scrape_interval: " << interval << "\n"
           << "  scrape_timeout: " << interval << "\n"
           << "  evaluation_interval: " << interval << "\n";
    if (!rule_files.empty()) {
      config << "rule_files:\n";
      for (const std::string& f : rule_files) config << "  - \"" << f << "\"\n";
    }
    config << "scrape_configs:\n"
           << "  - job_name: \"gaptrain_test\"\n"
           << scrape;
    config.close();
    if (!config) {
      return Status::Internal("cannot write " + s->config_path_);
    }
  }

  Status last;
  for (int attempt = 0; attempt < kPortAttempts; ++attempt) {
    GAPTRAIN_RETURN_IF_ERROR(FindFreePort(&s->port_));
    GAPTRAIN_RETURN_IF_ERROR(s->Spawn(binary));
    bool address_in_use = false;
    last = s->WaitUntilReady(kReadyTimeoutSeconds, &address_in_use);
    if (last.ok()) {
      *server = std::move(s);
      return Status::OK();
    }
    s->KillChild();
    if (!address_in_use) break;  // only a lost port race is worth a retry
  }
  return last;
}

Status PrometheusTestServer::Spawn(const std::string& binary) {
  const std::vector<std::string> args = {
      binary,
      "--config.file=" + config_path_,
      "--web.listen-address=127.0.0.1:" + std::to_string(port_),
      "--storage.tsdb.path=" + data_dir_,
      "--storage.tsdb.retention.time=1h",
      "--log.level=info",
  };
  std::vector<char*> argv;
  for (const std::string& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  const int log_fd =
      ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) return Status::Internal(Errno("cannot open " + log_path_));
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) {
    ::close(log_fd);
    return Status::Internal(Errno("cannot open /dev/null"));
  }
  const pid_t parent = ::getpid();

  const pid_t pid = ::fork();
  if (pid == 0) {
    // Child: async-signal-safe calls only until exec.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // parent already gone
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGTERM, SIG_DFL);
    ::dup2(null_fd, 0);
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    // Inherit no other descriptor (e.g. a test's listening sockets).
    if (::syscall(SYS_close_range, 3u, ~0u, 0u) != 0) {
      const long max_fd = ::sysconf(_SC_OPEN_MAX);
      for (long fd = 3; fd < (max_fd > 0 ? max_fd : 1024); ++fd) ::close(fd);
    }
    ::execv(argv[0], argv.data());
    static const char kMsg[] = "exec of the prometheus binary failed\n";
    ssize_t ignored = ::write(2, kMsg, sizeof(kMsg) - 1);
    (void)ignored;
    ::_exit(127);
  }
  const int fork_errno = errno;
  ::close(log_fd);
  ::close(null_fd);
  if (pid < 0) {
    errno = fork_errno;
    return Status::Internal(Errno("fork"));
  }
  pid_ = pid;
  return Status::OK();
}

Status PrometheusTestServer::WaitUntilReady(double timeout_seconds,
                                            bool* address_in_use) {
  *address_in_use = false;
  const Clock::time_point deadline = DeadlineAfter(timeout_seconds);
  std::string last = "no answer yet";
  for (;;) {
    int wstatus = 0;
    const pid_t r = ::waitpid(pid_, &wstatus, WNOHANG);
    if (r == pid_ || (r < 0 && errno == ECHILD)) {
      pid_ = -1;
      const std::string log = LogTail();
      *address_in_use = log.find("address already in use") != std::string::npos;
      std::string how = "exited";
      if (r > 0 && WIFEXITED(wstatus)) {
        how = "exited with status " + std::to_string(WEXITSTATUS(wstatus));
      } else if (r > 0 && WIFSIGNALED(wstatus)) {
        how = "was killed by signal " + std::to_string(WTERMSIG(wstatus));
      }
      return Status::Unavailable(
          "prometheus on 127.0.0.1:" + std::to_string(port_) + " " + how +
          " before it was ready; its log ends:\n" + log);
    }

    HttpClientResponse ready;
    Status s = HttpGet("127.0.0.1", port_, "/-/ready", 1.0, &ready);
    if (s.ok() && ready.status == 200) {
      // Make sure the server answering is ours, not another one that took
      // the port first: its storage path must be our data dir.
      HttpClientResponse flags;
      s = HttpGet("127.0.0.1", port_, "/api/v1/status/flags",
                  kHttpTimeoutSeconds, &flags);
      if (s.ok() && flags.status == 200) {
        nlohmann::json j = nlohmann::json::parse(flags.body, nullptr, false);
        if (!j.is_discarded() && j.contains("data") && j["data"].is_object() &&
            j["data"].contains("storage.tsdb.path") &&
            j["data"]["storage.tsdb.path"] == data_dir_) {
          return Status::OK();
        }
        last = "another server answers on this port: " + flags.body;
      }
    } else {
      last = s.ok() ? "/-/ready answered HTTP " + std::to_string(ready.status)
                    : s.ToString();
    }

    if (Clock::now() >= deadline) {
      return Status(Status::Code::kDeadlineExceeded,
                    "prometheus on 127.0.0.1:" + std::to_string(port_) +
                        " was not ready after " + Seconds(timeout_seconds) +
                        " (" + last + "); its log ends:\n" + LogTail());
    }
    std::this_thread::sleep_for(kPollPeriod);
  }
}

void PrometheusTestServer::KillChild() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  const Clock::time_point deadline = Clock::now() + kTermGrace;
  for (;;) {
    const pid_t r = ::waitpid(pid_, nullptr, WNOHANG);
    if (r == pid_ || (r < 0 && errno != EINTR)) {
      pid_ = -1;
      return;
    }
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid_, SIGKILL);
  while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

PrometheusTestServer::~PrometheusTestServer() {
  KillChild();
  if (!dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

std::string PrometheusTestServer::LogTail(size_t max_bytes) const {
  std::string log;
  if (!ReadFile(log_path_, &log).ok()) return "(no log)";
  if (log.size() > max_bytes) log = "..." + log.substr(log.size() - max_bytes);
  return log;
}

Status PrometheusTestServer::Api(
    const std::string& path,
    const std::vector<std::pair<std::string, std::string>>& params,
    std::string* json) {
  std::string target = "/api/v1/" + path;
  for (size_t i = 0; i < params.size(); ++i) {
    target += (i == 0 ? "?" : "&") + UrlEncode(params[i].first) + "=" +
              UrlEncode(params[i].second);
  }
  HttpClientResponse r;
  GAPTRAIN_RETURN_IF_ERROR(
      HttpGet("127.0.0.1", port_, target, kHttpTimeoutSeconds, &r));
  if (r.status == 400 || r.status == 422) {
    return Status::InvalidArgument("prometheus rejected " + target + " (HTTP " +
                                   std::to_string(r.status) + "): " + r.body);
  }
  if (r.status != 200) {
    return Status::Unavailable("prometheus answered " + target + " with HTTP " +
                               std::to_string(r.status) + ": " + r.body);
  }
  *json = std::move(r.body);
  return Status::OK();
}

Status PrometheusTestServer::Query(const std::string& promql,
                                   std::string* json) {
  Status s = Api("query", {{"query", promql}}, json);
  if (!s.ok()) return Status(s.code(), "query '" + promql + "': " + s.message());
  return s;
}

Status PrometheusTestServer::QueryRange(const std::string& promql, double start,
                                        double end, double step_seconds,
                                        std::string* json) {
  char range[3][32];
  std::snprintf(range[0], sizeof range[0], "%.3f", start);
  std::snprintf(range[1], sizeof range[1], "%.3f", end);
  std::snprintf(range[2], sizeof range[2], "%.3f", step_seconds);
  Status s = Api("query_range",
                 {{"query", promql}, {"start", range[0]}, {"end", range[1]},
                  {"step", range[2]}},
                 json);
  if (!s.ok()) return Status(s.code(), "range query '" + promql + "': " + s.message());
  return s;
}

Status PrometheusTestServer::WaitForSeries(const std::string& promql,
                                           double timeout_seconds,
                                           double* value) {
  const Clock::time_point deadline = DeadlineAfter(timeout_seconds);
  std::string last;
  for (;;) {
    std::string body;
    Status s = Query(promql, &body);
    if (s.code() == Status::Code::kInvalidArgument) return s;
    if (s.ok()) {
      last = body;
      nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
      if (j.is_discarded() || !j.is_object()) {
        return Status::DataLoss("prometheus answered '" + promql +
                                "' with invalid JSON: " + body);
      }
      if (j.value("status", "") != "success") {
        return Status::InvalidArgument("query '" + promql +
                                       "' failed: " + body);
      }
      const nlohmann::json& data = j["data"];
      const std::string type =
          data.is_object() ? data.value("resultType", "") : "";
      const nlohmann::json* sample = nullptr;  // [timestamp, "value"]
      if (type == "vector" && data["result"].is_array() &&
          !data["result"].empty()) {
        const nlohmann::json& first = data["result"][0];
        if (first.is_object() && first.contains("value"))
          sample = &first["value"];
      } else if (type == "scalar") {
        sample = &data["result"];
      } else if (type != "vector") {
        return Status::InvalidArgument("query '" + promql + "' returned a " +
                                       type + ", not a vector: " + body);
      }
      if (sample != nullptr) {
        if (!sample->is_array() || sample->size() != 2 ||
            !(*sample)[1].is_string()) {
          return Status::DataLoss("unexpected sample in answer to '" + promql +
                                  "': " + body);
        }
        const std::string text = (*sample)[1].get<std::string>();
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0') {
          return Status::DataLoss("sample value '" + text + "' of '" + promql +
                                  "' is not a number");
        }
        *value = v;
        return Status::OK();
      }
    } else {
      last = s.ToString();
    }
    if (Clock::now() >= deadline) {
      return Status(Status::Code::kDeadlineExceeded,
                    "no series for '" + promql + "' after " +
                        Seconds(timeout_seconds) + "; last answer: " + last +
                        "\nprometheus log ends:\n" + LogTail(2048));
    }
    std::this_thread::sleep_for(kPollPeriod);
  }
}

}  // namespace gaptrain
