#include "helm/helm.h"

#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

#include "operator/envtest/envtest_assets.h"
#include "services/base/file_contents.h"
#include "services/base/process.h"

extern char** environ;

namespace gaptrain {
namespace {

// A directory of its own under $TEST_TMPDIR (else $TMPDIR, else /tmp),
// removed with everything in it when this goes out of scope.
class TemporaryDirectory {
 public:
  Status Create() {
    const char* base = std::getenv("TEST_TMPDIR");
    if (base == nullptr || *base == '\0') base = std::getenv("TMPDIR");
    if (base == nullptr || *base == '\0') base = "/tmp";
    std::string pattern = std::string(base) + "/helm-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      return Status::Unavailable("mkdtemp " + pattern + ": " + std::strerror(errno));
    }
    path_ = pattern;
    return Status::OK();
  }
  ~TemporaryDirectory() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string CommandLine(const std::vector<std::string>& argv) {
  std::string line;
  for (const std::string& arg : argv) {
    if (!line.empty()) line += ' ';
    line += arg;
  }
  return line;
}

// Runs argv (argv[0] a path) with stdout and stderr captured apart, so
// diagnostics never mix into the manifests.
Status RunCapturing(const std::vector<std::string>& argv,
                    const std::vector<std::pair<std::string, std::string>>& extra_env,
                    const std::string& dir, std::string* stdout_text, std::string* stderr_text,
                    int* wait_status) {
  const std::string out_path = dir + "/stdout";
  const std::string err_path = dir + "/stderr";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  std::vector<std::string> strings = argv;
  std::vector<char*> args;
  for (std::string& s : strings) args.push_back(s.data());
  args.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    bool replaced = false;
    for (const auto& extra : extra_env) replaced |= entry.rfind(extra.first + "=", 0) == 0;
    if (!replaced) env_strings.push_back(entry);
  }
  for (const auto& [name, value] : extra_env) env_strings.push_back(name + "=" + value);
  std::vector<char*> env;
  for (std::string& s : env_strings) env.push_back(s.data());
  env.push_back(nullptr);
  pid_t pid;
  const int spawn_error = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (spawn_error != 0) {
    return Status::Unavailable("cannot run " + argv[0] + ": " + std::strerror(spawn_error));
  }
  int status;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return Status::Internal("waitpid " + argv[0] + ": " + std::strerror(errno));
    }
  }
  ReadFile(out_path, stdout_text).ok();  // nothing printed: ""
  ReadFile(err_path, stderr_text).ok();
  *wait_status = status;
  return Status::OK();
}

bool Succeeded(int wait_status) { return WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0; }

// The value flags, in the order of HelmValues' comment.
Status AppendValueFlags(const HelmValues& values, const std::string& dir,
                        std::vector<std::string>* argv) {
  for (const std::string& file : values.files) {
    argv->push_back("-f");
    argv->push_back(file);
  }
  if (!values.overrides.empty()) {
    // JSON is YAML, and strings stay strings: no --set parsing of commas,
    // brackets or numbers-looking text.
    const std::string path = dir + "/overrides.yaml";
    std::ofstream out(path, std::ios::binary);
    out << values.overrides.dump(2) << "\n";
    out.close();
    if (!out) return Status::Unavailable("cannot write " + path);
    argv->push_back("-f");
    argv->push_back(path);
  }
  for (const std::string& set : values.set) {
    argv->push_back("--set");
    argv->push_back(set);
  }
  for (const std::string& set : values.set_string) {
    argv->push_back("--set-string");
    argv->push_back(set);
  }
  return Status::OK();
}

}  // namespace

Status Helm::Find(Helm* out) {
  std::string path;
  GAPTRAIN_RETURN_IF_ERROR(envtest::FindTool("helm", &path));
  *out = Helm(path);
  return Status::OK();
}

Status Helm::Run(const std::vector<std::string>& before, const std::string& chart_dir,
                 const std::vector<std::string>& after, const HelmValues& values,
                 std::string* out, std::string* err) const {
  TemporaryDirectory dir;
  GAPTRAIN_RETURN_IF_ERROR(dir.Create());
  // Helm reads a copy with every link followed: it warns of each link it
  // meets, and a Bazel test's runfiles are all links.
  std::vector<std::string> args = {binary_};
  args.insert(args.end(), before.begin(), before.end());
  if (!chart_dir.empty()) {
    const std::string chart =
        dir.path() + "/chart/" +
        std::filesystem::path(chart_dir).lexically_normal().filename().string();
    std::error_code error;
    std::filesystem::create_directories(chart, error);
    if (!error) {
      std::filesystem::copy(chart_dir, chart, std::filesystem::copy_options::recursive, error);
    }
    if (error) {
      return Status::NotFound("cannot copy the chart " + chart_dir + ": " + error.message());
    }
    args.push_back(chart);
  }
  args.insert(args.end(), after.begin(), after.end());
  GAPTRAIN_RETURN_IF_ERROR(AppendValueFlags(values, dir.path(), &args));
  // Helm's own state in the temporary directory: nothing of the user's
  // (repositories, plugins, registry logins) changes what a test sees.
  const std::vector<std::pair<std::string, std::string>> env = {
      {"HELM_CACHE_HOME", dir.path() + "/cache"},
      {"HELM_CONFIG_HOME", dir.path() + "/config"},
      {"HELM_DATA_HOME", dir.path() + "/data"}};
  int wait_status;
  GAPTRAIN_RETURN_IF_ERROR(RunCapturing(args, env, dir.path(), out, err, &wait_status));
  if (!Succeeded(wait_status)) {
    return Status::InvalidArgument(CommandLine(args) + ": " + DescribeWaitStatus(wait_status) +
                                   ": " + *err);
  }
  return Status::OK();
}

Status Helm::Template(const std::string& chart_dir, const HelmRelease& release,
                      const HelmValues& values, std::string* manifests) const {
  std::string err;
  return Run({"template", release.name}, chart_dir, {"--namespace", release.name_space}, values,
             manifests, &err);
}

Status Helm::Lint(const std::string& chart_dir, const HelmValues& values,
                  std::string* report) const {
  std::string out, err;
  const Status s = Run({"lint"}, chart_dir, {}, values, &out, &err);
  *report = out + err;
  if (!s.ok()) return Status::InvalidArgument(s.message() + "\n" + out);
  return Status::OK();
}

Status Helm::Install(const std::string& chart_dir, const HelmRelease& release,
                     const HelmValues& values, const std::string& kubeconfig_file, bool dry_run,
                     nlohmann::json* release_json) const {
  std::vector<std::string> after = {"--namespace",  release.name_space, "--create-namespace",
                                    "--kubeconfig", kubeconfig_file,    "--output",
                                    "json"};
  if (dry_run) after.push_back("--dry-run=client");
  std::string out, err;
  GAPTRAIN_RETURN_IF_ERROR(Run({"install", release.name}, chart_dir, after, values, &out, &err));
  *release_json = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  if (!release_json->is_object()) {
    return Status::Internal("helm install " + release.name + " printed no release as JSON: " +
                            out + err);
  }
  return Status::OK();
}

Status Helm::Uninstall(const HelmRelease& release, const std::string& kubeconfig_file) const {
  std::string out, err;
  return Run({"uninstall", release.name}, "",
             {"--namespace", release.name_space, "--kubeconfig", kubeconfig_file, "--wait"},
             HelmValues(), &out, &err);
}

}  // namespace gaptrain
