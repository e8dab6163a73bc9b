// What a fuzz target (bazel/fuzz.bzl) uses to assert a decoder's contract.
// A broken contract aborts with a message: libFuzzer then saves the input
// as a crash, and the corpus replay test fails naming it. Returning from
// the target means the input was handled as promised.

#ifndef GAPTRAIN_SERVICES_TESTING_FUZZ_CONTRACT_H_
#define GAPTRAIN_SERVICES_TESTING_FUZZ_CONTRACT_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "services/base/status.h"

// The entry point every fuzz target defines (libFuzzer's interface).
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace gaptrain {

// Prints "fuzz contract broken: <what>" and aborts.
[[noreturn]] void FuzzContractBroken(const std::string& what);

// Aborts with `what` unless `holds`.
inline void FuzzExpect(bool holds, const std::string& what) {
  if (!holds) FuzzContractBroken(what);
}

// A rejection as decoders promise it: not OK, one of `codes`, and a
// message that says something. `decoder` names the call in the abort.
void FuzzExpectRejection(const Status& status, std::initializer_list<Status::Code> codes,
                         const std::string& decoder);

// For targets whose decoder reads files: a path named `name` in a folder
// of this process's own, created once under $TEST_TMPDIR (else /tmp).
std::string FuzzScratchPath(const std::string& name);
// Writes data[0, size) to `path`, replacing it; aborts on an I/O error.
void FuzzWriteFile(const std::string& path, const void* data, size_t size);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_TESTING_FUZZ_CONTRACT_H_
