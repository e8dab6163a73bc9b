// `gaptrain export`: takes the trained model away. Writes a checkpoint's
// parameters θ as a torch.save-format file that Python reads with
// torch.load() as a state_dict (name -> float32 tensor, in layout order) for
// load_state_dict(); see services/master/checkpoint_torch.h. The checkpoint
// is a file, or the newest valid one in a `gaptrain run` run directory's
// checkpoints/ or in a master's checkpoint directory (--checkpoint-dir: the
// operator's export pod reads a cluster job's volume so;
// CheckpointDirectory::RestoreNewest: corrupt newer files are skipped and
// reported). With --card, a model card (JSON: the tensors, the version, the
// job and accuracy the flags give) is written beside it.
//
// What callers may rely on: OUT is replaced atomically (WriteFileAtomically)
// and only after the checkpoint verified; an error before the rename leaves
// OUT as it was. The card is written (atomically too) only after OUT. The
// checkpoint is only read, so a read-only mount is enough.

#ifndef GAPTRAIN_CLI_EXPORT_EXPORT_COMMAND_H_
#define GAPTRAIN_CLI_EXPORT_EXPORT_COMMAND_H_

#include <string>
#include <vector>

namespace gaptrain {

// Exit codes: 0 written; 1 no valid checkpoint could be read (missing,
// unreadable, torn or corrupt) or OUT could not be written; 2 bad usage.
int ExportCommand(const std::vector<std::string>& args);

// The same, with what would go to stdout appended to *out and what would go
// to stderr to *err (the one-line result, usage, errors, skipped files).
int ExportCommand(const std::vector<std::string>& args, std::string* out, std::string* err);

}  // namespace gaptrain

#endif  // GAPTRAIN_CLI_EXPORT_EXPORT_COMMAND_H_
