// The services report the ports they bound (--ports-file) with
// WritePortsFile once they listen; whoever started one waits for them with
// WaitForPortsFile. The file holds the numbers in decimal, separated by
// single spaces, in an order each service documents (e.g. "GRPC HTTP").

#ifndef GAPTRAIN_SERVICES_NET_PORTS_FILE_H_
#define GAPTRAIN_SERVICES_NET_PORTS_FILE_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "services/base/process.h"
#include "services/base/status.h"

namespace gaptrain {

// Writes `ports` to `path` atomically (services/base/atomic_file.h), so a
// poller never reads a partial list. INVALID_ARGUMENT for no ports or port
// 0, which no listening socket has.
Status WritePortsFile(const std::string& path, const std::vector<uint16_t>& ports);

// Reads `path` once, without waiting: OK and *ports set when it holds
// `count` port numbers, UNAVAILABLE when it does not (yet).
Status ReadPortsFile(const std::string& path, int count, std::vector<uint16_t>* ports);

// Polls `path` until it holds `count` port numbers (sets *ports), while
// `process` runs. UNAVAILABLE when the process exits first or `timeout`
// passes, with the tail of its log (Process::Spec::log_file). Polled:
// start-up takes milliseconds to seconds, in another process.
Status WaitForPortsFile(Process* process, const std::string& path, int count,
                        std::chrono::milliseconds timeout, std::vector<uint16_t>* ports);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_NET_PORTS_FILE_H_
