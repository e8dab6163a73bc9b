#include "cli/export/export_command.h"

#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <set>

#include "cli/run/local_job.h"
#include "services/common/file_paths.h"
#include "services/common/flag_values.h"
#include "services/common/status.h"
#include "services/engine/parameter_store.h"
#include "services/master/checkpoint.h"
#include "services/master/checkpoint_torch.h"

namespace gaptrain {
namespace {

constexpr char kUsage[] =
    "usage: gaptrain export CHECKPOINT -o OUT.pt\n"
    "       gaptrain export --run-dir DIR -o OUT.pt\n"
    "Writes a checkpoint's parameters as a PyTorch state_dict (torch.save format):\n"
    "in Python, model.load_state_dict(torch.load('OUT.pt')).\n"
    "  CHECKPOINT          a checkpoint file (ckpt-<version>.gtc)\n"
    "  --run-dir DIR       the newest valid checkpoint in DIR/checkpoints/, the run\n"
    "                      directory of 'gaptrain run' (e.g. runs/NAME)\n"
    "  -o, --output OUT.pt the file to write; replaced if it exists\n";

// The flags that take a value: their values are never CHECKPOINT.
const std::set<std::string> kValueFlags = {"-o", "--output", "--run-dir"};

int Fail(std::string* err, const std::string& message, int code) {
  *err += "gaptrain export: " + message + "\n";
  return code;
}

int Usage(std::string* err, const std::string& message) {
  return Fail(err, message + "\n" + kUsage, 2);
}

bool SameFile(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

// `text` as a Python string literal.
std::string PythonString(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\\' || c == '\'') quoted += '\\';
    if (c == '\n') {
      quoted += "\\n";
      continue;
    }
    quoted += c;
  }
  return quoted + "'";
}

// ReadCheckpoint's or RestoreNewest's error, saying what it means here.
std::string CheckpointError(const Status& s) {
  switch (s.code()) {
    case Status::Code::kDataLoss:
      return "corrupt checkpoint (torn or damaged; not exported): " + s.message();
    case Status::Code::kNotFound:
      return "no such checkpoint: " + s.message();
    default:
      return "cannot read the checkpoint: " + s.message();
  }
}

}  // namespace

int ExportCommand(const std::vector<std::string>& args, std::string* out, std::string* err) {
  // Positional arguments (CHECKPOINT) apart from the flags, which FlagSet
  // parses; each flag at most once.
  std::vector<std::string> positional, flag_args;
  std::map<std::string, int> seen;  // "--output" counts as "-o"
  bool output_long_form = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      *out += kUsage;
      return 0;
    }
    if (a.empty() || a[0] != '-') {
      positional.push_back(a);
      continue;
    }
    flag_args.push_back(a);
    if (kValueFlags.count(a) > 0 && i + 1 < args.size()) flag_args.push_back(args[++i]);
    output_long_form |= a == "--output";
    const std::string name = a == "--output" ? "-o" : a;
    if (++seen[name] > 1)
      return Usage(err, (name == "-o" ? "-o/--output" : name) + ": given twice");
  }
  std::string output, output_long, run_dir;
  FlagSet flags;
  flags.String("-o", &output);
  flags.String("--output", &output_long);
  flags.String("--run-dir", &run_dir);
  Status s = flags.Parse(flag_args);
  if (!s.ok()) return Usage(err, s.message());
  if (output_long_form) output = output_long;

  if (positional.size() > 1) return Usage(err, "unexpected argument '" + positional[1] + "'");
  const bool from_file = !positional.empty();
  const bool from_run = seen.count("--run-dir") > 0;
  if (from_file == from_run) {
    return Usage(err, from_file ? "give CHECKPOINT or --run-dir, not both"
                                : "give a CHECKPOINT file or --run-dir DIR");
  }
  const std::string checkpoint_arg = from_file ? positional[0] : "";
  if (from_file && checkpoint_arg.empty()) return Usage(err, "CHECKPOINT: empty path");
  if (from_run && run_dir.empty()) return Usage(err, "--run-dir: empty path");
  if (seen.count("-o") == 0) return Usage(err, "missing -o OUT.pt");
  if (output.empty()) return Usage(err, "-o: empty path");
  if (IsDirectory(output)) return Usage(err, "-o " + output + ": is a directory; name a file");
  if (!IsDirectory(DirName(output))) {
    return Usage(err, "-o " + output + ": directory " + DirName(output) + " does not exist");
  }
  if (from_file && IsDirectory(checkpoint_arg)) {
    return Usage(
        err, "CHECKPOINT " + checkpoint_arg + " is a directory; for a run directory use --run-dir");
  }

  // Verify the checkpoint (choosing the newest valid one for --run-dir) and
  // take the numbers to report.
  std::unique_ptr<ParameterStore> store;
  std::string checkpoint = checkpoint_arg;
  if (from_file) {
    s = ReadCheckpoint(checkpoint, &store, nullptr);
    if (!s.ok()) return Fail(err, CheckpointError(s), 1);
  } else {
    if (!IsDirectory(run_dir)) {
      return Fail(err, "--run-dir " + run_dir + ": no such directory", 1);
    }
    CheckpointDirectory dir(LocalJob::CheckpointDir(run_dir), /*keep=*/1);  // only read
    std::vector<std::string> skipped;
    s = dir.RestoreNewest(&store, nullptr, &checkpoint, &skipped);
    if (s.code() == Status::Code::kNotFound) {
      return Fail(err,
                  "no checkpoint in " + dir.dir() +
                      " (the master writes one every checkpoint interval and when the job "
                      "stops)",
                  1);
    }
    if (s.code() == Status::Code::kDataLoss) {
      return Fail(
          err, "no valid checkpoint in " + dir.dir() + ": every one is corrupt: " + s.message(), 1);
    }
    if (!s.ok()) return Fail(err, CheckpointError(s), 1);
    for (const std::string& reason : skipped) {
      *err += "gaptrain export: skipped checkpoint " + reason + "\n";
    }
  }
  if (SameFile(output, checkpoint)) {
    return Usage(err, "-o " + output + ": is the checkpoint itself; name another file");
  }
  const size_t tensors = store->layout().num_tensors();
  const size_t parameters = store->size();
  const uint64_t version = store->version();
  store.reset();  // the export reads the file again; hold one copy at a time

  s = ExportCheckpointForTorch(checkpoint, output);
  if (!s.ok()) {
    // Errors name their file: the checkpoint's when it changed after it
    // verified (e.g. a running job removed it), else OUT's.
    if (s.message().compare(0, checkpoint.size() + 1, checkpoint + ":") == 0) {
      return Fail(err, CheckpointError(s), 1);
    }
    return Fail(err, "cannot write " + output + ": " + s.message(), 1);
  }
  *out += "wrote " + output + ": " + std::to_string(tensors) + " tensors, " +
          std::to_string(parameters) + " parameters from " + checkpoint + " (version " +
          std::to_string(version) + "); in Python: model.load_state_dict(torch.load(" +
          PythonString(output) + "))\n";
  return 0;
}

int ExportCommand(const std::vector<std::string>& args) {
  std::string out, err;
  const int code = ExportCommand(args, &out, &err);
  std::fputs(out.c_str(), stdout);
  std::fputs(err.c_str(), stderr);
  return code;
}

}  // namespace gaptrain
