#include "services/testing/plain_pytorch_score.h"

#include <sys/wait.h>

#include <cstdio>

#include "services/testing/test_processes.h"

namespace gaptrain {

PlainPytorchScore ScoreStateDict(const std::string& model, const std::string& data_dir,
                                 const std::string& args) {
  PlainPytorchScore score;
  const int status = RunShell("/usr/bin/python3 scripts/score_state_dict.py '" + model + "' '" +
                                  data_dir + "' " + args,
                              &score.output);
  if (status != -1 && WIFEXITED(status)) score.exit_code = WEXITSTATUS(status);
  const size_t at = score.output.find("test accuracy ");
  if (at != std::string::npos) {
    std::sscanf(score.output.c_str() + at, "test accuracy %lf", &score.accuracy);
  }
  return score;
}

}  // namespace gaptrain
