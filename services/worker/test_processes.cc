#include "services/worker/test_processes.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

namespace gaptrain {

std::string TestTempDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  std::string cmd = "rm -rf '" + dir + "' && mkdir -p '" + dir + "'";
  if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "cannot create %s\n", dir.c_str());
  return dir;
}

bool Eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return condition();
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

ChildProcess::ChildProcess(const std::string& binary, std::vector<std::string> args,
                           const std::string& ports_file, const std::string& log_file,
                           const std::string& token, int port_count)
    : log_file_(log_file) {
  std::remove(ports_file.c_str());
  args.insert(args.begin(), binary);
  args.insert(args.end(), {"--ports-file", ports_file});
  pid_ = fork();
  if (pid_ == 0) {
    const int fd = open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    setenv("GAPTRAIN_TOKEN", token.c_str(), 1);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  Eventually([&] {
    std::ifstream in(ports_file);
    std::vector<int> ports;
    int p = 0;
    while (static_cast<int>(ports.size()) < port_count && in >> p) ports.push_back(p);
    if (static_cast<int>(ports.size()) == port_count) {
      ports_ = ports;
      return true;
    }
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return true;
    }
    return false;
  });
  if (ports_.empty()) {
    std::fprintf(stderr, "%s did not start; its log:\n%s\n", binary.c_str(),
                 ReadWholeFile(log_file).c_str());
  }
}

ChildProcess::~ChildProcess() { Kill(SIGKILL); }

void ChildProcess::Signal(int signal) {
  if (pid_ > 0) kill(pid_, signal);
}

bool ChildProcess::WaitExit(std::chrono::milliseconds timeout, int* status) {
  if (pid_ <= 0) return false;
  const bool exited = Eventually(
      [&] {
        if (waitpid(pid_, status, WNOHANG) == pid_) {
          pid_ = -1;
          return true;
        }
        return false;
      },
      timeout);
  return exited && pid_ == -1;
}

int ChildProcess::Kill(int signal) {
  if (pid_ <= 0) return -1;
  kill(pid_, signal);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return status;
}

}  // namespace gaptrain
