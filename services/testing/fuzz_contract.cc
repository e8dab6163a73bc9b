#include "services/testing/fuzz_contract.h"

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

}  // namespace gaptrain
