#include "services/plot/gnuplot.h"

#include <sys/wait.h>

#include <cstdio>

namespace gaptrain {

Status RunGnuplot(const std::string& script_path) {
  if (script_path.find('\'') != std::string::npos) {
    return Status::InvalidArgument("gnuplot script path has a quote: " + script_path);
  }
  const std::string command = "gnuplot '" + script_path + "' 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return Status::Unavailable("cannot start gnuplot");
  std::string output;
  char buf[256];
  while (fgets(buf, sizeof buf, pipe) != nullptr) output += buf;
  const int rc = pclose(pipe);
  if (rc == -1 || !WIFEXITED(rc) || WEXITSTATUS(rc) != 0) {
    if (rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 127) {
      return Status::FailedPrecondition(
          "gnuplot not found: install it with 'apt-get install gnuplot-nox' "
          "(scripts/bootstrap.sh does)");
    }
    return Status::Internal("gnuplot failed on " + script_path + ": " + output);
  }
  return Status::OK();
}

}  // namespace gaptrain
