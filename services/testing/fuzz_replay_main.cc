// The main() of a fuzzer built without libFuzzer: replays the files and
// folders named as arguments (libFuzzer's flags, "-name=value", are
// ignored), so `bazel run //pkg:x_fuzzer -- crash-file` reproduces a crash
// in any build.

#include <cstdio>
#include <string>
#include <vector>

#include "services/testing/fuzz_replay.h"

int main(int argc, char** argv) {
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    if (argv[i][0] != '-') paths.push_back(argv[i]);
  }
  std::vector<std::string> files;
  gaptrain::Status status = gaptrain::ListFuzzInputs(paths, &files);
  for (size_t i = 0; status.ok() && i < files.size(); ++i) {
    status = gaptrain::ReplayFuzzInput(files[i]);
  }
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    return 1;
  }
  std::printf("replayed %zu inputs\n", files.size());
  return 0;
}
