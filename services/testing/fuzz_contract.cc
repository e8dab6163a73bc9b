#include "services/testing/fuzz_contract.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace gaptrain {

void FuzzContractBroken(const std::string& what) {
  std::fprintf(stderr, "fuzz contract broken: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

void FuzzExpectRejection(const Status& status, std::initializer_list<Status::Code> codes,
                         const std::string& decoder) {
  FuzzExpect(!status.ok(), decoder + ": expected an error");
  bool listed = false;
  for (Status::Code code : codes) listed = listed || status.code() == code;
  FuzzExpect(listed, decoder + ": unexpected error code: " + status.ToString());
  FuzzExpect(!status.message().empty(), decoder + ": an error without a message");
}

std::string FuzzScratchPath(const std::string& name) {
  static const std::string dir = [] {
    const char* tmp = std::getenv("TEST_TMPDIR");
    std::string pattern = std::string(tmp != nullptr ? tmp : "/tmp") + "/fuzz_XXXXXX";
    FuzzExpect(::mkdtemp(&pattern[0]) != nullptr, "cannot create a scratch folder");
    return pattern;
  }();
  return dir + "/" + name;
}

void FuzzWriteFile(const std::string& path, const void* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  FuzzExpect(f != nullptr, "cannot write " + path);
  FuzzExpect(size == 0 || std::fwrite(data, 1, size, f) == size, "short write to " + path);
  FuzzExpect(std::fclose(f) == 0, "cannot close " + path);
}

}  // namespace gaptrain
