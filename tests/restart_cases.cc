#include "tests/restart_cases.h"

namespace gaptrain {

std::string RestartCase::Name() const {
  const std::string startup = "startup";
  const std::string end = first_end == "kill" ? "Killed"
                          : first_end.rfind(startup, 0) == 0
                              ? "StartupExit" + first_end.substr(startup.size())
                              : "Exit" + first_end;
  return policy + "_" + end + "_BackoffLimit" + std::to_string(backoff_limit);
}

const std::vector<RestartCase>& RestartCases() {
  static const std::vector<RestartCase> cases = {
      // Both trainers crash once and come back; 2 failures within 3.
      {"OnFailure", "3", 3, "Succeeded", "MaxUpdatesReached", ""},
      // The same 2 failures past backoffLimit 1.
      {"OnFailure", "3", 1, "Failed", "BackoffLimitExceeded",
       "2 failures exceed backoffLimit (1)"},
      // Exit code 3: the program gave up; neither comes back.
      {"ExitCode", "3", 3, "Failed", "TrainingJobFailed",
       "2 trainers failed permanently (restartPolicy ExitCode): fewer than minReplicas (1) "
       "can run"},
      // SIGKILL (137): retryable under ExitCode.
      {"ExitCode", "kill", 3, "Succeeded", "MaxUpdatesReached", ""},
      {"Never", "kill", 3, "Failed", "TrainingJobFailed",
       "2 trainers failed permanently (restartPolicy Never): fewer than minReplicas (1) "
       "can run"},
      // Exit 3 before registering (a script that fails to start): a crash
      // like any other, restarted under OnFailure.
      {"OnFailure", "startup3", 3, "Succeeded", "MaxUpdatesReached", ""},
  };
  return cases;
}

std::string CrashOnceTrainerScript() {
  return R"(import os, signal, sys
from torch import nn
import gaptrain
from dataset import FashionMNIST
from fashion_mnist_mlp import MLP

how = sys.argv[1]
marker = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "crashed-" + os.environ["GAPTRAIN_HOST_NAME"])
first = not os.path.exists(marker)
open(marker, "a").close()
if first and how.startswith("startup"):
    os._exit(int(how[len("startup"):]))
options = gaptrain.parse_options([])
model = MLP()
loss_fn = nn.CrossEntropyLoss()
with gaptrain.Trainer(model, FashionMNIST(options.data_path, train=True), options=options) as t:
    for inputs, targets in t.batches():
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        t.step(loss)
        if first:
            if how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            os._exit(int(how))
)";
}

std::string RestartJobYaml(const RestartCase& c, const std::string& name,
                           const std::string& script, const std::string& pythonpath,
                           const std::string& data_flow_map) {
  return "apiVersion: gaptrain.io/v1alpha1\n"
         "kind: TrainingJob\n"
         "metadata: {name: " + name + "}\n"
         "spec:\n"
         "  model: {builtin: mlp}\n"
         "  data: " + data_flow_map + "\n"
         "  training:\n"
         "    batchSize: 64\n"
         "    maxUpdates: 150\n"
         "    evalEveryUpdates: 100000\n"
         "    optimizer: {learningRate: 0.05, momentum: 0.9}\n"
         "    staleness: {rule: gap-aware}\n"
         "  runPolicy: {backoffLimit: " + std::to_string(c.backoff_limit) + "}\n"
         "  workers:\n"
         "    replicas: 2\n"
         "    minReplicas: 1\n"
         "    restartPolicy: " + c.policy + "\n"
         "    template:\n"
         "      spec:\n"
         "        containers:\n"
         "        - command: [/usr/bin/python3, " + script + ", '" + c.first_end + "']\n"
         "          env:\n"
         "          - {name: PYTHONPATH, value: '" + pythonpath + "'}\n"
         "  coordinator: {leaseSeconds: 3}\n";
}

}  // namespace gaptrain
