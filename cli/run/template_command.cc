#include "cli/run/template_command.h"

#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

namespace gaptrain {
namespace {


bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

Status StringList(const YAML::Node& container, const std::string& where, const char* key,
                  std::vector<std::string>* out) {
  const YAML::Node n = container[key];
  if (!n || n.IsNull()) return Status::OK();
  if (!n.IsSequence()) {
    return Status::InvalidArgument(where + "." + key + ": must be a list");
  }
  for (size_t i = 0; i < n.size(); ++i) {
    if (!n[i].IsScalar()) {
      return Status::InvalidArgument(where + "." + key + "[" +
                                     std::to_string(i) + "]: must be a string");
    }
    out->push_back(n[i].Scalar());
  }
  return Status::OK();
}

std::string Join(const std::string& dir, const std::string& path) {
  return dir.empty() || dir == "." ? path : dir + "/" + path;
}

}  // namespace

std::string JobFileDir(const std::string& job_file) {
  const size_t slash = job_file.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return job_file.substr(0, slash);
}

namespace {

// The command of the pod template `template_yaml` at `field`
// ("spec.workers.template").
Status ReadTemplateCommand(const std::string& template_yaml, const std::string& field,
                           const std::string& job_dir, const std::string& path_env,
                           TemplateCommand* out) {
  *out = TemplateCommand();
  if (template_yaml.empty()) return Status::OK();
  const std::string container_field = field + ".spec.containers[0]";
  YAML::Node root;
  try {
    root = YAML::Load(template_yaml);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(field + ": " + e.msg);
  }
  if (!root.IsMap() || !root["spec"] || !root["spec"].IsMap()) return Status::OK();
  const YAML::Node containers = root["spec"]["containers"];
  if (!containers || !containers.IsSequence() || containers.size() == 0 ||
      !containers[0].IsMap()) {
    return Status::OK();
  }
  const YAML::Node container = containers[0];
  std::vector<std::string> command, args;
  GAPTRAIN_RETURN_IF_ERROR(StringList(container, container_field, "command", &command));
  GAPTRAIN_RETURN_IF_ERROR(StringList(container, container_field, "args", &args));
  if (command.empty()) return Status::OK();  // gaptrain-worker, with args as extra flags

  std::string program = command[0];
  if (program.empty()) {
    return Status::InvalidArgument(container_field + ".command[0]: is empty");
  }
  if (program.find('/') == std::string::npos) {
    std::string found;
    size_t start = 0;
    while (found.empty() && start <= path_env.size()) {
      size_t end = path_env.find(':', start);
      if (end == std::string::npos) end = path_env.size();
      const std::string dir = end > start ? path_env.substr(start, end - start) : ".";
      const std::string candidate = dir + "/" + program;
      if (access(candidate.c_str(), X_OK) == 0) found = candidate;
      start = end + 1;
    }
    if (found.empty()) {
      return Status::NotFound(container_field + ".command[0]: " + program +
                              " is not on $PATH");
    }
    program = found;
  } else if (program[0] != '/') {
    program = Join(job_dir, program);
  }
  if (access(program.c_str(), X_OK) != 0) {
    return Status::NotFound(container_field + ".command[0]: cannot execute " + program);
  }
  out->argv.push_back(program);
  for (size_t i = 1; i < command.size() + args.size(); ++i) {
    const std::string& word = i < command.size() ? command[i] : args[i - command.size()];
    if (!word.empty() && word[0] != '-' && word[0] != '/' && Exists(Join(job_dir, word))) {
      out->argv.push_back(Join(job_dir, word));
    } else {
      out->argv.push_back(word);
    }
  }

  const YAML::Node env = container["env"];
  if (env && env.IsSequence()) {
    for (size_t i = 0; i < env.size(); ++i) {
      const YAML::Node e = env[i];
      if (!e.IsMap() || !e["name"] || !e["name"].IsScalar()) {
        return Status::InvalidArgument(container_field + ".env[" + std::to_string(i) +
                                       "]: must be an object with a name");
      }
      if (e["value"] && e["value"].IsScalar()) {
        out->env.emplace_back(e["name"].Scalar(), e["value"].Scalar());
      }
    }
  }
  return Status::OK();
}

}  // namespace

Status TemplateTrainerCommand(const TrainingJob& job, const std::string& job_dir,
                              const std::string& path_env, TemplateCommand* out) {
  return ReadTemplateCommand(job.workers.template_yaml, "spec.workers.template", job_dir,
                             path_env, out);
}

Status TemplateEvaluatorCommand(const TrainingJob& job, const std::string& job_dir,
                                const std::string& path_env, TemplateCommand* out) {
  return ReadTemplateCommand(job.evaluator.template_yaml, "spec.evaluator.template", job_dir,
                             path_env, out);
}

}  // namespace gaptrain
