#include "services/testing/missing_requirement.h"

#include <cstdlib>
#include <string>

namespace gaptrain {

bool RunningInCi() {
  const char* ci = std::getenv("CI");
  if (ci == nullptr) return false;
  const std::string value(ci);
  return value == "true" || value == "1";
}

}  // namespace gaptrain
