#include "cli/export/export_options.h"

#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

#include "services/base/flag_values.h"

namespace gaptrain {
namespace {

constexpr char kUsage[] =
    "usage: gaptrain export CHECKPOINT -o OUT.pt\n"
    "       gaptrain export --run-dir DIR -o OUT.pt\n"
    "       gaptrain export --checkpoint-dir DIR -o OUT.pt\n"
    "Writes a checkpoint's parameters as a PyTorch state_dict (torch.save format):\n"
    "in Python, model.load_state_dict(torch.load('OUT.pt')).\n"
    "  CHECKPOINT          a checkpoint file (ckpt-<version>.gtc)\n"
    "  --run-dir DIR       the newest valid checkpoint in DIR/checkpoints/, the run\n"
    "                      directory of 'gaptrain run' (e.g. runs/NAME)\n"
    "  --checkpoint-dir DIR  the newest valid checkpoint in DIR, a master's\n"
    "                      --checkpoint-dir (a cluster job's checkpoint volume)\n"
    "  -o, --output OUT.pt the file to write; replaced if it exists\n"
    "  --mkdir             create OUT's missing parent directories\n"
    "  --card CARD.json    also write a model card: the tensors' names and shapes,\n"
    "                      the checkpoint's version, and what the flags below add\n"
    "  --job JOB.yaml      the card names the job, its model and its dataset\n"
    "  --test-accuracy A   the card records this test accuracy (in [0, 1])\n";

// The flags that take a value: their values are never CHECKPOINT.
const std::set<std::string> kValueFlags = {"-o",   "--output", "--run-dir", "--checkpoint-dir",
                                           "--card", "--job",  "--test-accuracy"};

}  // namespace

const char* ExportUsage() { return kUsage; }

Status ParseExportFlags(const std::vector<std::string>& args, ExportOptions* options) {
  // Positional arguments (CHECKPOINT) apart from the flags, which FlagSet
  // parses; each flag at most once.
  std::vector<std::string> positional, flag_args;
  std::map<std::string, int> seen;  // "--output" counts as "-o"
  bool output_long_form = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      *options = ExportOptions();
      options->help = true;
      return Status::OK();
    }
    if (a.empty() || a[0] != '-') {
      positional.push_back(a);
      continue;
    }
    flag_args.push_back(a);
    if (kValueFlags.count(a) > 0 && i + 1 < args.size()) flag_args.push_back(args[++i]);
    output_long_form |= a == "--output";
    const std::string name = a == "--output" ? "-o" : a;
    if (++seen[name] > 1) {
      return Status::InvalidArgument((name == "-o" ? "-o/--output" : name) + ": given twice");
    }
  }
  ExportOptions o;
  std::string output_long, accuracy_text;
  FlagSet flags;
  flags.String("-o", &o.output);
  flags.String("--output", &output_long);
  flags.String("--run-dir", &o.run_dir);
  flags.String("--checkpoint-dir", &o.checkpoint_dir);
  flags.Switch("--mkdir", &o.make_dirs);
  flags.String("--card", &o.card);
  flags.String("--job", &o.job_file);
  flags.String("--test-accuracy", &accuracy_text);
  GAPTRAIN_RETURN_IF_ERROR(flags.Parse(flag_args));
  if (output_long_form) o.output = output_long;

  if (positional.size() > 1) {
    return Status::InvalidArgument("unexpected argument '" + positional[1] + "'");
  }
  const bool from_file = !positional.empty();
  const bool from_run = seen.count("--run-dir") > 0;
  const bool from_dir = seen.count("--checkpoint-dir") > 0;
  const int sources = int{from_file} + int{from_run} + int{from_dir};
  if (sources != 1) {
    return Status::InvalidArgument(sources > 1
                                       ? "give one of CHECKPOINT, --run-dir and --checkpoint-dir"
                                       : "give a CHECKPOINT file or --run-dir DIR");
  }
  if (from_file) o.checkpoint = positional[0];
  if (from_file && o.checkpoint.empty()) return Status::InvalidArgument("CHECKPOINT: empty path");
  if (from_run && o.run_dir.empty()) return Status::InvalidArgument("--run-dir: empty path");
  if (from_dir && o.checkpoint_dir.empty()) {
    return Status::InvalidArgument("--checkpoint-dir: empty path");
  }
  if (seen.count("-o") == 0) return Status::InvalidArgument("missing -o OUT.pt");
  if (o.output.empty()) return Status::InvalidArgument("-o: empty path");
  if (seen.count("--card") > 0 && o.card.empty()) {
    return Status::InvalidArgument("--card: name a file");
  }
  if (o.card.empty() && (seen.count("--job") > 0 || seen.count("--test-accuracy") > 0)) {
    return Status::InvalidArgument(
        "--job and --test-accuracy describe the model card: add --card CARD.json");
  }
  if (seen.count("--job") > 0 && o.job_file.empty()) {
    return Status::InvalidArgument("--job: empty path");
  }
  if (seen.count("--test-accuracy") > 0) {
    char* end = nullptr;
    const double accuracy = std::strtod(accuracy_text.c_str(), &end);
    if (accuracy_text.empty() || *end != '\0' || !std::isfinite(accuracy) || accuracy < 0 ||
        accuracy > 1) {
      return Status::InvalidArgument("--test-accuracy: must be a number in [0, 1], got '" +
                                     accuracy_text + "'");
    }
    o.test_accuracy = accuracy;
  }
  *options = o;
  return Status::OK();
}

}  // namespace gaptrain
