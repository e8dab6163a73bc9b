// `gaptrain run` with bad input: each job-file error (and each bad flag) is
// reported with the field and the reason, the exit code is 2, and nothing
// starts: no run directory appears. `gaptrain status` without a running
// job says so.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <fstream>
#include <string>
#include <vector>

#include "services/testing/testdata_dir.h"
#include "tests/gaptrain_run_fixture.h"

namespace gaptrain {
namespace {

struct BadJob {
  std::string name;
  std::string spec;      // the manifest's spec section, or a whole file if it starts with '!'
  std::string expected;  // in the error
  std::vector<std::string> flags = {};  // more of gaptrain run's
};

std::string Manifest(const std::string& spec) {
  return "apiVersion: gaptrain.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: bad}\nspec:\n" +
         spec;
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

TEST(BadJobTest, EachErrorNamesTheFieldAndNothingStarts) {
  const std::string data = SharedDataDir() + "/mnist";
  ASSERT_FALSE(SharedDataDir().empty()) << "the real MNIST is needed";
  const std::string good_data = "  data: {path: " + data + "}\n";
  const std::vector<BadJob> cases = {
      {"unknown-field", good_data + "  training: {learningrate: 0.1, epochs: 1}\n",
       "spec.training.learningrate: unknown field"},
      {"momentum", good_data + "  training: {epochs: 1, optimizer: {momentum: 1.5}}\n",
       "spec.training.optimizer.momentum: must be in [0, 1)"},
      {"rule", good_data + "  training: {epochs: 1, staleness: {rule: gap-awful}}\n",
       "spec.training.staleness.rule"},
      {"no-length", good_data + "  training: {batchSize: 64}\n", "epochs"},
      {"replicas", good_data + "  training: {epochs: 1}\n  workers: {replicas: 0}\n",
       "spec.workers.replicas"},
      {"replicas-limit", good_data + "  training: {epochs: 1}\n  workers: {replicas: 100000}\n",
       "spec.workers.replicas: must be <= 1024"},
      // Within the schema, beyond this machine (8 trainers per CPU).
      {"replicas-local", good_data + "  training: {epochs: 1}\n  workers: {replicas: 1024}\n",
       "spec.workers.replicas: 1024 trainers are too many for this machine's"},
      {"epochs-limit", good_data + "  training: {epochs: 1e300}\n",
       "spec.training.epochs: must be <= 1000000"},
      {"epochs-no-sample", good_data + "  training: {epochs: 1.0e-6}\n",
       "spec.training.epochs: 1.0e-6 epochs of 60000 samples cover no sample"},
      {"missing-data", "  data: {path: /nonexistent/mnist}\n  training: {epochs: 1}\n",
       "spec.data.path"},
      {"suspended", good_data + "  training: {epochs: 1}\n  runPolicy: {suspend: true}\n",
       "spec.runPolicy.suspend"},
      {"declared-and-scripted",
       good_data + "  training: {epochs: 1}\n  model: {fromTrainer: true, torchscript: m.pt}\n",
       "spec.model.fromTrainer: the trainers declare the model; leave torchscript unset"},
      // The trainers declare the model: gaptrain-worker has none.
      {"declared-without-trainer-command",
       good_data + "  training: {epochs: 1}\n  model: {fromTrainer: true}\n",
       "spec.model.fromTrainer: spec.workers.template sets no command"},
      {"declared-without-evaluator-command",
       good_data + "  training: {epochs: 1}\n  model: {fromTrainer: true}\n"
                   "  workers: {template: {spec: {containers: [{command: [/bin/true]}]}}}\n",
       "spec.model.fromTrainer: spec.evaluator.template sets no command"},
      {"target-without-users-evaluator",
       good_data + "  training: {epochs: 1, target: {metric: f1, atLeast: 0.8}}\n",
       "spec.training.target.metric: gaptrain's evaluator reports accuracy and loss only"},
      {"chaos-shard", good_data + "  training: {epochs: 1}\n  master: {shards: 2}\n",
       "--chaos: shard 2: the job has spec.master.shards 2",
       {"--chaos", "master=50%,shard=2"}},
      {"not-yaml", "!{{{ this is: not: yaml", "bad.yaml"},
      {"wrong-kind", "!apiVersion: gaptrain.io/v1alpha1\nkind: PyTorchJob\nmetadata: {name: x}\n",
       "kind"},
  };
  for (const BadJob& c : cases) {
    const std::string dir = TestTempDir("bad-" + c.name);
    const std::string file = dir + "/bad.yaml";
    std::ofstream(file) << (c.spec[0] == '!' ? c.spec.substr(1) : Manifest(c.spec));
    const std::string run_dir = dir + "/run";
    std::string output;
    std::vector<std::string> args = {"run", "-f", file, "--run-dir", run_dir};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    const int status = RunGaptrain(args, &output);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << c.name << ": " << output;
    EXPECT_NE(output.find(c.expected), std::string::npos)
        << c.name << ": expected '" << c.expected << "' in:\n" << output;
    EXPECT_NE(output.find("nothing was started"), std::string::npos) << c.name << ": " << output;
    EXPECT_FALSE(Exists(run_dir)) << c.name << ": something started";
  }
}

TEST(BadJobTest, BadFlagsAreNamed) {
  const std::string dir = TestTempDir("bad-flags");
  const struct {
    std::vector<std::string> args;
    std::string expected;
  } cases[] = {
      {{"run"}, "-f: the job file is required"},
      {{"run", "-f", dir + "/missing.yaml"}, "-f: " + dir + "/missing.yaml: cannot read"},
      {{"run", "-f", "x.yaml", "--chaos", "every=soon"}, "--chaos: every"},
      {{"run", "-f", "x.yaml", "--chaos", "often=1s"}, "--chaos: unknown key 'often'"},
      {{"run", "-f", "x.yaml", "--threads-per-worker", "0"}, "--threads-per-worker"},
      {{"run", "-f", "x.yaml", "--bogus"}, "unknown flag '--bogus'"},
      {{"status"}, "give one of NAME, --run-dir, --coordinator"},
      {{"status", "--coordinator", "nohost"}, "--coordinator: must be HOST:PORT"},
  };
  for (const auto& c : cases) {
    std::string output;
    const int status = RunGaptrain(c.args, &output);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << c.args[0] << ": " << output;
    EXPECT_NE(output.find(c.expected), std::string::npos)
        << "expected '" << c.expected << "' in:\n" << output;
  }
}

TEST(BadJobTest, StatusWithoutARunningJobSaysSo) {
  const std::string dir = TestTempDir("no-job");
  std::string output;
  const int status = RunGaptrain({"status", "--run-dir", dir + "/nothing"}, &output);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << output;
  EXPECT_NE(output.find("no job is running there"), std::string::npos) << output;
}

}  // namespace
}  // namespace gaptrain
