#include "services/testing/test_processes.h"

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "services/net/ports_file.h"

namespace gaptrain {

std::string TestTempDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  std::string cmd = "rm -rf '" + dir + "' && mkdir -p '" + dir + "'";
  if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "cannot create %s\n", dir.c_str());
  return dir;
}

int RunShell(const std::string& command, std::string* output) {
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) output->append(buf, n);
  return ::pclose(pipe);
}

bool Eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return condition();
}

ChildProcess::ChildProcess(const std::string& binary, std::vector<std::string> args,
                           const std::string& ports_file, const std::string& log_file,
                           const std::string& token, int port_count)
    : log_file_(log_file) {
  std::remove(ports_file.c_str());
  args.insert(args.end(), {"--ports-file", ports_file});
  Process::Spec spec;
  spec.binary = binary;
  spec.args = std::move(args);
  spec.env = {{"GAPTRAIN_TOKEN", token}};
  spec.log_file = log_file;
  Status s = Process::Start(spec, &process_);
  std::vector<uint16_t> ports;
  if (s.ok()) {
    s = WaitForPortsFile(process_.get(), ports_file, port_count, std::chrono::seconds(60), &ports);
  }
  if (!s.ok()) {
    std::fprintf(stderr, "%s did not start: %s\n", binary.c_str(), s.ToString().c_str());
    return;
  }
  ports_.assign(ports.begin(), ports.end());
}

ChildProcess::~ChildProcess() = default;  // Process SIGKILLs a running child

bool ChildProcess::running() const { return process_ != nullptr && process_->Running(); }

void ChildProcess::Signal(int signal) {
  if (process_ != nullptr) process_->Signal(signal);
}

bool ChildProcess::WaitExit(std::chrono::milliseconds timeout, int* status) {
  if (process_ == nullptr || !process_->WaitExit(timeout)) return false;
  *status = process_->wait_status();
  return true;
}

int ChildProcess::Kill(int signal) {
  if (!running()) return -1;
  process_->Signal(signal);
  process_->WaitExit(std::chrono::hours(1));
  return process_->wait_status();
}

}  // namespace gaptrain
