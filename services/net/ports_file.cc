#include "services/net/ports_file.h"

#include <fstream>
#include <thread>

#include "services/base/atomic_file.h"
#include "services/base/file_contents.h"

namespace gaptrain {
namespace {

std::string Tail(const std::string& path, size_t max_bytes = 2000) {
  std::string text;
  ReadFile(path, &text).ok();  // a log not written yet is empty
  return text.size() > max_bytes ? "..." + text.substr(text.size() - max_bytes) : text;
}

bool ReadPorts(const std::string& path, int count, std::vector<uint16_t>* ports) {
  std::ifstream in(path);
  std::vector<uint16_t> read;
  unsigned port = 0;
  while (static_cast<int>(read.size()) < count && in >> port) {
    read.push_back(static_cast<uint16_t>(port));
  }
  if (static_cast<int>(read.size()) != count) return false;
  *ports = read;
  return true;
}

}  // namespace

Status WritePortsFile(const std::string& path, const std::vector<uint16_t>& ports) {
  if (ports.empty()) return Status::InvalidArgument(path + ": no ports to report");
  std::string text;
  for (uint16_t port : ports) {
    if (port == 0) return Status::InvalidArgument(path + ": port 0 is not a bound port");
    if (!text.empty()) text += ' ';
    text += std::to_string(port);
  }
  return WriteFileAtomically(path, text.data(), text.size());
}

Status ReadPortsFile(const std::string& path, int count, std::vector<uint16_t>* ports) {
  if (ReadPorts(path, count, ports)) return Status::OK();
  return Status::Unavailable(path + ": does not hold " + std::to_string(count) + " ports yet");
}

Status WaitForPortsFile(Process* process, const std::string& path, int count,
                        std::chrono::milliseconds timeout, std::vector<uint16_t>* ports) {
  const std::string& log = process->spec().log_file;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!ReadPorts(path, count, ports)) {
    if (!process->Running()) {
      return Status::Unavailable(process->spec().binary + " exited during start-up (" +
                                 DescribeWaitStatus(process->wait_status()) + "); " + log +
                                 " ends:\n" + Tail(log));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return Status::Unavailable(process->spec().binary + " did not report its ports within " +
                                 std::to_string(timeout.count() / 1000) + " s; " + log +
                                 " ends:\n" + Tail(log));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Status::OK();
}

}  // namespace gaptrain
