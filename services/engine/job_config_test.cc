#include "services/engine/job_config.h"

#include <gtest/gtest.h>

#include <string>

#include "services/base/available_cpus.h"

namespace gaptrain {
namespace {

const char kJob[] = R"(apiVersion: gaptrain.io/v1alpha1
kind: TrainingJob
metadata: {name: threads}
spec:
  model: {builtin: mlp}
  data: {format: mnist-idx, path: /data}
  training:
    epochs: 1
    optimizer: {learningRate: 0.1, momentum: 0.9}
    staleness: {rule: gap-aware}
)";

RuleConfig RuleOf(const std::string& text) {
  TrainingJob job;
  Status parsed = ParseTrainingJob(text, "job.yaml", &job);
  EXPECT_TRUE(parsed.ok()) << parsed.ToString();
  RuleConfig rule;
  Status s = RuleConfigFromJob(job, &rule);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return rule;
}

TEST(JobConfigTest, UpdateThreadsDefaultToTheMastersCpus) {
  const RuleConfig rule = RuleOf(kJob);
  EXPECT_EQ(rule.num_threads, AvailableCpus());
  EXPECT_EQ(rule.kind, RuleKind::kGapAware);
  EXPECT_FLOAT_EQ(rule.momentum, 0.9f);
}

TEST(JobConfigTest, UpdateThreadsAsSet) {
  EXPECT_EQ(RuleOf(std::string(kJob) + "  master: {updateThreads: 3}\n").num_threads, 3);
  EXPECT_EQ(RuleOf(std::string(kJob) + "  master: {updateThreads: 0}\n").num_threads,
            AvailableCpus());
}

}  // namespace
}  // namespace gaptrain
