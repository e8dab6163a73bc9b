// A user's own command for a job's trainers or evaluator, for `gaptrain
// run`: when the first container of spec.workers.template (or
// spec.evaluator.template) sets `command`, a trainer (the evaluator) runs
// that command (plus the container's `args`) in place of gaptrain-worker,
// as the operator runs it on a cluster (docs/trainingjob.md, "Your own
// trainer").
//
// Locally, the command is run as given, except for paths:
//   - the program (command[0]): a name without '/' is looked up on $PATH;
//     a relative path is resolved against the job file's directory;
//   - every other word that does not start with '-' and names a file or
//     directory relative to the job file's directory becomes that path
//     (`python3 train.py` next to job.yaml runs that train.py, wherever
//     `gaptrain run` is started).
// The container's `env` entries with a `value` are set in the process's
// environment (valueFrom, which needs a pod, is skipped).

#ifndef GAPTRAIN_CLI_RUN_TEMPLATE_COMMAND_H_
#define GAPTRAIN_CLI_RUN_TEMPLATE_COMMAND_H_

#include <string>
#include <utility>
#include <vector>

#include "services/api/training_job.h"
#include "services/base/status.h"

namespace gaptrain {

struct TemplateCommand {
  std::vector<std::string> argv;  // empty: the template sets no command
  std::vector<std::pair<std::string, std::string>> env;
};

// The directory of `job_file` ("." for a bare name).
std::string JobFileDir(const std::string& job_file);

// Reads the command of `job`'s spec.workers.template. `path_env` is $PATH.
// NOT_FOUND when the program cannot be found; INVALID_ARGUMENT for a
// template whose first container's command, args or env are of the wrong
// shape.
Status TemplateTrainerCommand(const TrainingJob& job, const std::string& job_dir,
                              const std::string& path_env, TemplateCommand* out);

// The same for spec.evaluator.template.
Status TemplateEvaluatorCommand(const TrainingJob& job, const std::string& job_dir,
                                const std::string& path_env, TemplateCommand* out);

}  // namespace gaptrain

#endif  // GAPTRAIN_CLI_RUN_TEMPLATE_COMMAND_H_
