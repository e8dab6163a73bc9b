#include "services/base/blas_environment.h"

#include <cstdlib>

namespace gaptrain {

std::vector<std::pair<std::string, std::string>> BlasStartEnvironment() {
  std::vector<std::pair<std::string, std::string>> env;
  if (std::getenv("OPENBLAS_NUM_THREADS") == nullptr) env.emplace_back("OPENBLAS_NUM_THREADS", "1");
  return env;
}

}  // namespace gaptrain
