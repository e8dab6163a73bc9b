// scripts/score_state_dict.py against gaptrain's own LeNet-5: a model built
// by services/learn (builtin lenet5), checkpointed and exported as
// `gaptrain export` does, scores in plain PyTorch exactly as
// services/learn's evaluator scores it on the real MNIST test set (the same
// correct count, the same mean loss): the script's network, parameter
// names and normalisation are gaptrain's, so its accuracy is the one a user
// gets from the exported file. Also: a state_dict of another network is
// refused (strict loading), and --min-accuracy decides the exit status.
// Needs /usr/bin/python3 with torch (python3-torch) and ../shared/data/mnist.

#include <gtest/gtest.h>
#include <stdio.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "services/engine/parameter_store.h"
#include "services/learn/dataset.h"
#include "services/learn/evaluator.h"
#include "services/learn/model.h"
#include "services/master/checkpoint.h"
#include "services/master/checkpoint_torch.h"
#include "services/testing/missing_requirement.h"
#include "services/testing/test_files.h"
#include "services/testing/test_processes.h"
#include "services/testing/testdata_dir.h"

namespace gaptrain {
namespace {

constexpr char kScript[] = "scripts/score_state_dict.py";
constexpr char kPython[] = "/usr/bin/python3";

struct Scored {
  int code = -1;
  std::string output;  // stdout and stderr
};

Scored Score(const std::string& args) {
  Scored r;
  const int status = RunShell(std::string(kPython) + " " + kScript + " " + args, &r.output);
  r.code = status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// `model`'s parameters as `gaptrain export` writes them: a checkpoint of a
// store with the model's layout, exported.
void Export(const Model& model, const std::string& dir, const std::string& out) {
  ParameterStore store(model.layout());
  std::memcpy(store.params(), model.parameters(), store.size() * sizeof(float));
  const std::string checkpoint = dir + "/model.gtc";
  ASSERT_TRUE(WriteCheckpoint(store, CheckpointMeta(), checkpoint).ok());
  const Status s = ExportCheckpointForTorch(checkpoint, out);
  ASSERT_TRUE(s.ok()) << s.ToString();
}

class ScoreStateDictTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Score("--help").code != 0) {
      GAPTRAIN_SKIP_OR_FAIL_IN_CI(std::string(kPython) + " with torch is needed to run " +
                                  kScript);
    }
    const Status found = FindSharedDataDir(&data_);
    if (!found.ok()) GAPTRAIN_SKIP_OR_FAIL_IN_CI(found.message());
    mnist_ = data_ + "/mnist";
    dir_ = TestDir("score_state_dict_test");
  }

  std::string data_, mnist_, dir_;
};

TEST_F(ScoreStateDictTest, ScoresGaptrainsLenet5AsItsEvaluatorDoes) {
  Dataset test;
  Status s = LoadDataset(DatasetFormat::kMnistIdx, mnist_, Split::kTest, &test);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::unique_ptr<Model> model;
  s = Model::CreateBuiltin("lenet5", ModelInput{1, 28, 28, 10}, /*seed=*/7, &model);
  ASSERT_TRUE(s.ok()) << s.ToString();
  // Far from uniform logits, so that the loss and every argmax depend on
  // each layer: a wrong padding, pooling or normalisation changes both.
  for (size_t i = 0; i < model->layout().size(); ++i) model->parameters()[i] *= 4.0f;
  EvalResult expected;
  s = EvaluateModel(model.get(), test, 1000, &expected);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const std::string pt = dir_ + "/lenet5.pt";
  Export(*model, dir_, pt);

  const Scored r = Score("'" + pt + "' '" + mnist_ + "'");
  ASSERT_EQ(r.code, 0) << r.output;
  int correct = -1, total = -1;
  double accuracy = -1, loss = -1;
  ASSERT_EQ(std::sscanf(r.output.c_str(), "test accuracy %lf (%d/%d), loss %lf", &accuracy,
                        &correct, &total, &loss),
            4)
      << r.output;
  EXPECT_EQ(total, 10000);
  const int expected_correct = static_cast<int>(std::lround(expected.accuracy * total));
  // Two libraries' float kernels may break a near-tie differently.
  EXPECT_NEAR(correct, expected_correct, 2) << r.output;
  EXPECT_NEAR(loss, expected.loss, 1e-3 * std::max(1.0, expected.loss)) << r.output;
  std::printf("C++ evaluator: %d/10000, loss %.4f; plain PyTorch: %s", expected_correct,
              expected.loss, r.output.c_str());

  EXPECT_EQ(Score("'" + pt + "' '" + mnist_ + "' --min-accuracy 1").code, 1);
}

TEST_F(ScoreStateDictTest, AnotherNetworksStateDictIsRefused) {
  std::unique_ptr<Model> mlp;
  ASSERT_TRUE(Model::CreateBuiltin("mlp", ModelInput{1, 28, 28, 10}, 1, &mlp).ok());
  const std::string pt = dir_ + "/mlp.pt";
  Export(*mlp, dir_, pt);
  const Scored r = Score("'" + pt + "' '" + mnist_ + "'");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("cannot load as gaptrain's lenet5"), std::string::npos) << r.output;
  const Scored missing = Score("'" + dir_ + "/absent.pt' '" + mnist_ + "'");
  EXPECT_EQ(missing.code, 1) << missing.output;
}

}  // namespace
}  // namespace gaptrain
