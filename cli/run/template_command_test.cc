#include "cli/run/template_command.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "services/testing/test_processes.h"

namespace gaptrain {
namespace {

TrainingJob JobWithTemplate(const std::string& template_yaml) {
  TrainingJob job;
  job.workers.template_yaml = template_yaml;
  return job;
}

TEST(JobFileDirTest, DirectoryOfTheFile) {
  EXPECT_EQ(JobFileDir("job.yaml"), ".");
  EXPECT_EQ(JobFileDir("examples/python/job.yaml"), "examples/python");
  EXPECT_EQ(JobFileDir("/job.yaml"), "/");
}

TEST(TemplateTrainerCommandTest, NoTemplateOrNoCommandIsNone) {
  TemplateCommand command;
  ASSERT_TRUE(TemplateTrainerCommand(TrainingJob(), ".", "/usr/bin:/bin", &command).ok());
  EXPECT_TRUE(command.argv.empty());
  ASSERT_TRUE(TemplateTrainerCommand(
                  JobWithTemplate("spec: {containers: [{args: [--threads, '2']}]}"), ".",
                  "/usr/bin:/bin", &command)
                  .ok());
  EXPECT_TRUE(command.argv.empty());
}

TEST(TemplateTrainerCommandTest, ResolvesTheProgramAndFilesNextToTheJob) {
  const std::string dir = TestTempDir("template_command");
  std::ofstream(dir + "/train.py") << "print('hi')\n";
  std::ofstream(dir + "/run.sh") << "#!/bin/sh\n";
  chmod((dir + "/run.sh").c_str(), 0755);
  TemplateCommand command;
  ASSERT_TRUE(TemplateTrainerCommand(
                  JobWithTemplate("spec:\n  containers:\n  - command: [sh, train.py]\n"
                                  "    args: [--epochs, '2', train.py, missing.py, /abs]\n"
                                  "    env:\n    - {name: PYTHONPATH, value: /x/python}\n"
                                  "    - name: POD\n      valueFrom: {fieldRef: {fieldPath: "
                                  "metadata.name}}\n"),
                  dir, "/nonexistent:/bin:/usr/bin", &command)
                  .ok());
  ASSERT_EQ(command.argv.size(), 7u);
  EXPECT_EQ(command.argv[0], "/bin/sh");
  EXPECT_EQ(command.argv[1], dir + "/train.py");
  EXPECT_EQ(command.argv[2], "--epochs");
  EXPECT_EQ(command.argv[3], "2");
  EXPECT_EQ(command.argv[4], dir + "/train.py");
  EXPECT_EQ(command.argv[5], "missing.py");
  EXPECT_EQ(command.argv[6], "/abs");
  ASSERT_EQ(command.env.size(), 1u);
  EXPECT_EQ(command.env[0].first, "PYTHONPATH");
  EXPECT_EQ(command.env[0].second, "/x/python");

  ASSERT_TRUE(TemplateTrainerCommand(JobWithTemplate("spec: {containers: [{command: [./run.sh]}]}"),
                                     dir, "", &command)
                  .ok());
  ASSERT_EQ(command.argv.size(), 1u);
  EXPECT_EQ(command.argv[0], dir + "/./run.sh");
}

TEST(TemplateTrainerCommandTest, AProgramThatCannotRunIsNotFound) {
  TemplateCommand command;
  Status s = TemplateTrainerCommand(
      JobWithTemplate("spec: {containers: [{command: [no-such-trainer-xyz]}]}"), ".", "/bin",
      &command);
  EXPECT_EQ(s.code(), Status::Code::kNotFound) << s.ToString();
  EXPECT_NE(s.message().find("spec.workers.template.spec.containers[0].command[0]"),
            std::string::npos);
  s = TemplateTrainerCommand(JobWithTemplate("spec: {containers: [{command: [./nope.sh]}]}"),
                             "/tmp", "/bin", &command);
  EXPECT_EQ(s.code(), Status::Code::kNotFound) << s.ToString();
  s = TemplateTrainerCommand(JobWithTemplate("spec: {containers: [{command: {a: b}}]}"), ".",
                             "/bin", &command);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
}

// The evaluator's template: its own command, errors naming its field; the
// workers' template does not count for it.
TEST(TemplateEvaluatorCommandTest, ReadsTheEvaluatorsTemplate) {
  TrainingJob job = JobWithTemplate("spec: {containers: [{command: [/bin/true]}]}");
  TemplateCommand command;
  ASSERT_TRUE(TemplateEvaluatorCommand(job, ".", "/usr/bin:/bin", &command).ok());
  EXPECT_TRUE(command.argv.empty());
  job.evaluator.template_yaml =
      "spec: {containers: [{command: [sh, -c], args: [evaluate], env: [{name: A, value: b}]}]}";
  ASSERT_TRUE(TemplateEvaluatorCommand(job, ".", "/usr/bin:/bin", &command).ok());
  ASSERT_EQ(command.argv.size(), 3u);
  EXPECT_EQ(command.argv[1], "-c");
  EXPECT_EQ(command.env, (std::vector<std::pair<std::string, std::string>>{{"A", "b"}}));
  job.evaluator.template_yaml = "spec: {containers: [{command: [no-such-evaluator]}]}";
  const Status s = TemplateEvaluatorCommand(job, ".", "/usr/bin:/bin", &command);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_EQ(s.message(),
            "spec.evaluator.template.spec.containers[0].command[0]: no-such-evaluator is not on "
            "$PATH");
}

}  // namespace
}  // namespace gaptrain
