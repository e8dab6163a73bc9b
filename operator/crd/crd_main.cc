// gaptrain-crd: `gaptrain crd` without LibTorch, for scripts/generate-crd.sh.

#include <string>
#include <vector>

#include "operator/crd/crd_command.h"

int main(int argc, char** argv) {
  return gaptrain::CrdCommand(std::vector<std::string>(argv + 1, argv + argc));
}
