// An exported LeNet-5 (or MLP) scored in plain PyTorch, outside gaptrain:
// scripts/score_state_dict.py (declare "//:scripts/score_state_dict.py" as
// data) loads the state_dict with strict=True into its own model and
// prints "test accuracy A (...)" on MNIST-style IDX files. Tests that
// compare the accuracy a job reported with its export's use this.

#ifndef GAPTRAIN_SERVICES_TESTING_PLAIN_PYTORCH_SCORE_H_
#define GAPTRAIN_SERVICES_TESTING_PLAIN_PYTORCH_SCORE_H_

#include <string>

namespace gaptrain {

struct PlainPytorchScore {
  int exit_code = -1;   // the script's exit code; -1: it did not run or exit
  std::string output;   // what it printed (stdout and stderr)
  double accuracy = -1; // the test accuracy it printed; -1: none printed
};

// Runs /usr/bin/python3 scripts/score_state_dict.py MODEL DATA_DIR ARGS
// (ARGS: more of its options, shell-quoted by the caller, e.g.
// "--min-accuracy 0.97").
PlainPytorchScore ScoreStateDict(const std::string& model, const std::string& data_dir,
                                 const std::string& args = "");

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_TESTING_PLAIN_PYTORCH_SCORE_H_
