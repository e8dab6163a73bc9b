#include "helm/helm_template.h"

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

extern char** environ;

namespace gaptrain {
namespace {

constexpr char kNotesHeader[] = "NOTES:\n";

// A directory of its own under $TEST_TMPDIR (else $TMPDIR, else /tmp),
// removed with everything in it when this goes out of scope.
class TemporaryDirectory {
 public:
  Status Create() {
    const char* base = std::getenv("TEST_TMPDIR");
    if (base == nullptr || *base == '\0') base = std::getenv("TMPDIR");
    if (base == nullptr || *base == '\0') base = "/tmp";
    std::string pattern = std::string(base) + "/helm-template-XXXXXX";
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
Status RunCapturing(const std::vector<std::string>& argv, const std::string& dir,
                    std::string* stdout_text, std::string* stderr_text, int* wait_status) {
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
  pid_t pid;
  const int spawn_error = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
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

std::string DescribeExit(int wait_status) {
  if (WIFEXITED(wait_status)) return "exit code " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) return "killed by signal " + std::to_string(WTERMSIG(wait_status));
  return "wait status " + std::to_string(wait_status);
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

Status HelmTemplate::Find(HelmTemplate* out) {
  std::string path;
  GAPTRAIN_RETURN_IF_ERROR(envtest::FindTool("helm-template", &path));
  *out = HelmTemplate(path);
  return Status::OK();
}

Status HelmTemplate::Template(const std::string& chart_dir, const HelmRelease& release,
                              const HelmValues& values, RenderedChart* out) const {
  TemporaryDirectory dir;
  GAPTRAIN_RETURN_IF_ERROR(dir.Create());
  std::vector<std::string> argv = {binary_, "template", chart_dir};
  argv.insert(argv.end(), {"--name", release.name, "--namespace", release.name_space});
  GAPTRAIN_RETURN_IF_ERROR(AppendValueFlags(values, dir.path(), &argv));
  int wait_status;
  *out = RenderedChart();
  GAPTRAIN_RETURN_IF_ERROR(
      RunCapturing(argv, dir.path(), &out->manifests, &out->stderr_text, &wait_status));
  if (!Succeeded(wait_status)) {
    return Status::InvalidArgument(CommandLine(argv) + ": " + DescribeExit(wait_status) + ": " +
                                   out->stderr_text);
  }
  // The notes follow the first line "NOTES:"; anything Helm logs while
  // loading the chart comes before them.
  const std::string& err = out->stderr_text;
  size_t at = 0;
  while (at < err.size() && err.compare(at, std::strlen(kNotesHeader), kNotesHeader) != 0) {
    const size_t newline = err.find('\n', at);
    at = newline == std::string::npos ? err.size() : newline + 1;
  }
  if (at < err.size()) {
    out->notes = err.substr(at + std::strlen(kNotesHeader));
    // helm-template ends the notes with a newline of its own.
    if (!out->notes.empty() && out->notes.back() == '\n') out->notes.pop_back();
  }
  return Status::OK();
}

Status HelmTemplate::Lint(const std::string& chart_dir, const HelmValues& values,
                          std::string* output) const {
  TemporaryDirectory dir;
  GAPTRAIN_RETURN_IF_ERROR(dir.Create());
  std::vector<std::string> argv = {binary_, "lint", chart_dir};
  GAPTRAIN_RETURN_IF_ERROR(AppendValueFlags(values, dir.path(), &argv));
  std::string stdout_text, stderr_text;
  int wait_status;
  GAPTRAIN_RETURN_IF_ERROR(
      RunCapturing(argv, dir.path(), &stdout_text, &stderr_text, &wait_status));
  *output = stdout_text + stderr_text;
  if (!Succeeded(wait_status)) {
    return Status::InvalidArgument(CommandLine(argv) + ": " + DescribeExit(wait_status) + ": " +
                                   *output);
  }
  return Status::OK();
}

}  // namespace gaptrain
