// The services report the ports they bound (--ports-file: the numbers,
// space-separated, written atomically once they listen). Whoever started
// one waits here for them.

#ifndef GAPTRAIN_SERVICES_COMMON_PORTS_FILE_H_
#define GAPTRAIN_SERVICES_COMMON_PORTS_FILE_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "services/common/process.h"
#include "services/common/status.h"

namespace gaptrain {

// Polls `path` until it holds `count` port numbers (sets *ports), while
// `process` runs. UNAVAILABLE when the process exits first or `timeout`
// passes, with the tail of its log (Process::Spec::log_file). Polled:
// start-up takes milliseconds to seconds, in another process.
Status WaitForPortsFile(Process* process, const std::string& path, int count,
                        std::chrono::milliseconds timeout, std::vector<uint16_t>* ports);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_COMMON_PORTS_FILE_H_
