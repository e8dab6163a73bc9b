// ExportOptions: `gaptrain export`'s command line, apart from the command
// (which links LibTorch) so that a test can parse what the operator's
// export pod runs (tests/pod_commands_test.cc) without loading it.
//
// What callers may rely on: ParseExportFlags reads only `args`, never the
// file system; on success exactly one source is set (checkpoint, run_dir
// or checkpoint_dir, non-empty), output is non-empty, card is non-empty
// whenever job_file or test_accuracy is set, and test_accuracy is in
// [0, 1]. What needs the file system (a directory where a file belongs,
// OUT's directory) is ExportCommand's to check. An error is
// INVALID_ARGUMENT whose message is what `gaptrain export` prints before
// its usage ("-o/--output: given twice", "unknown flag '--format'").

#ifndef GAPTRAIN_CLI_EXPORT_EXPORT_OPTIONS_H_
#define GAPTRAIN_CLI_EXPORT_EXPORT_OPTIONS_H_

#include <optional>
#include <string>
#include <vector>

#include "services/base/status.h"

namespace gaptrain {

struct ExportOptions {
  bool help = false;                     // -h, --help: nothing else is read
  std::string checkpoint;                // CHECKPOINT: a checkpoint file
  std::string run_dir;                   // --run-dir DIR: `gaptrain run`'s run directory
  std::string checkpoint_dir;            // --checkpoint-dir DIR: a master's checkpoints
  std::string output;                    // -o, --output OUT.pt (required)
  bool make_dirs = false;                // --mkdir: create OUT's and the card's directories
  std::string card;                      // --card CARD.json: write a model card
  std::string job_file;                  // --job JOB.yaml: the card names the job
  std::optional<double> test_accuracy;   // --test-accuracy A: the card records it
};

// Parses `gaptrain export`'s arguments (those after "export"); each flag
// at most once.
Status ParseExportFlags(const std::vector<std::string>& args, ExportOptions* options);

// The usage text `gaptrain export --help` prints.
const char* ExportUsage();

}  // namespace gaptrain

#endif  // GAPTRAIN_CLI_EXPORT_EXPORT_OPTIONS_H_
