// Feeds files to a fuzz target's LLVMFuzzerTestOneInput outside libFuzzer:
// the corpus replay tests and the fuzzers of non-fuzz builds
// (bazel/fuzz.bzl). Each input is copied into a heap block of exactly its
// size, so that under --config=asan a read past the input is reported.

#ifndef GAPTRAIN_SERVICES_TESTING_FUZZ_REPLAY_H_
#define GAPTRAIN_SERVICES_TESTING_FUZZ_REPLAY_H_

#include <string>
#include <vector>

#include "services/base/status.h"

namespace gaptrain {

// The regular files among `paths` and (recursively) in the folders among
// them, sorted; NOT_FOUND naming a path that does not exist.
Status ListFuzzInputs(const std::vector<std::string>& paths, std::vector<std::string>* files);

// Runs the target on the bytes of `file`; an unreadable file is an error.
// A broken contract aborts (fuzz_contract.h).
Status ReplayFuzzInput(const std::string& file);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_TESTING_FUZZ_REPLAY_H_
