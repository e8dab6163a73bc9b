// RestartCases: restartPolicy and backoffLimit cases that both executors
// run, `gaptrain run` (tests/restart_policy_e2e_test.cc) and the operator
// on the real control plane (operator/operator_e2e_test.cc), with the same
// trainer, the same manifest and the same expected end: the two decide
// with one rule (services/jobplan) and must agree.
//
// The trainer is a user's own loop (gaptrain.Trainer) over the builtin
// mlp's layout on Fashion-MNIST; its first incarnation on each host (a
// marker file per $GAPTRAIN_HOST_NAME beside the script) ends after its
// first update with an exit code, or by SIGKILL (137, as a kubelet
// reports it), or, for "startupN", with exit code N before it registers.

#ifndef GAPTRAIN_TESTS_RESTART_CASES_H_
#define GAPTRAIN_TESTS_RESTART_CASES_H_

#include <string>
#include <vector>

namespace gaptrain {

struct RestartCase {
  std::string policy;     // spec.workers.restartPolicy
  std::string first_end;  // the first incarnation's exit code, "kill" or "startupN"
  int backoff_limit;
  std::string outcome;    // Succeeded | Failed
  std::string reason;     // gaptrain run's summary reason, the operator's Failed reason
  std::string message;    // part of the failure's message ("" for a success)

  // "ExitCode_Exit3_BackoffLimit3": a test name.
  std::string Name() const;
};

// Every case: OnFailure restarts (and fails past backoffLimit 1), ExitCode
// keeps exit 3 down and retries SIGKILL, Never keeps SIGKILL down, and a
// crash during start-up is restarted as any other.
const std::vector<RestartCase>& RestartCases();

// The trainer script, to write as trainer.py in a directory of its own
// (its markers go there: writable by the trainers' user).
std::string CrashOnceTrainerScript();

// The manifest for `c`: 2 trainers (minReplicas 1) running
// `/usr/bin/python3 SCRIPT FIRST_END` (Debian's, with torch) with PYTHONPATH `pythonpath`, maxUpdates 150,
// the data as `data_flow_map` (a YAML flow map: the path, a claim).
std::string RestartJobYaml(const RestartCase& c, const std::string& name,
                           const std::string& script, const std::string& pythonpath,
                           const std::string& data_flow_map);

}  // namespace gaptrain

#endif  // GAPTRAIN_TESTS_RESTART_CASES_H_
