#include "cli/export/export_command.h"

#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/export/export_options.h"
#include "cli/run/local_job.h"
#include "services/api/training_job.h"
#include "services/base/atomic_file.h"
#include "services/base/file_paths.h"
#include "services/base/os_error.h"
#include "services/base/status.h"
#include "services/engine/parameter_store.h"
#include "services/master/checkpoint.h"
#include "services/master/checkpoint_torch.h"
#include "services/master/shard_checkpoints.h"

namespace gaptrain {
namespace {

int Fail(std::string* err, const std::string& message, int code) {
  *err += "gaptrain export: " + message + "\n";
  return code;
}

int Usage(std::string* err, const std::string& message) {
  return Fail(err, message + "\n" + ExportUsage(), 2);
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

// The model card: what someone holding only the .pt needs to use it (which
// network, its tensors, how far it trained, how well it scored), as JSON
// beside it. `job` is null without --job; accuracy is negative without
// --test-accuracy.
std::string ModelCard(const std::string& output, const std::string& checkpoint,
                      const ParameterStore& store, const CheckpointMeta& meta,
                      const TrainingJob* job, double accuracy) {
  nlohmann::ordered_json card;
  card["format"] = "pytorch-state-dict";
  card["stateDict"] = output.substr(output.rfind('/') + 1);
  card["load"] = "model.load_state_dict(torch.load(" +
                 PythonString(output.substr(output.rfind('/') + 1)) + "))";
  if (job != nullptr) {
    card["job"] = {{"name", job->name}, {"namespace", job->namespace_name}};
    if (job->model.torchscript.empty()) {
      card["model"] = {{"builtin", job->model.builtin}};
    } else {
      card["model"] = {{"torchscript", job->model.torchscript}};
    }
    card["data"] = {{"format", job->data.format}};
  }
  card["version"] = store.version();
  if (meta.model_layout.size() > 0 && checkpoint.find(", ") != std::string::npos) {
    // A sharded job's: "shard-I/ckpt-....gtc" for each shard, in order.
    nlohmann::ordered_json files = nlohmann::ordered_json::array();
    for (size_t at = 0; at < checkpoint.size();) {
      size_t end = checkpoint.find(", ", at);
      if (end == std::string::npos) end = checkpoint.size();
      const std::string path = checkpoint.substr(at, end - at);
      files.push_back(path.substr(path.rfind('/', path.rfind('/') - 1) + 1));
      at = end + 2;
    }
    card["checkpoints"] = std::move(files);
  } else {
    card["checkpoint"] = checkpoint.substr(checkpoint.rfind('/') + 1);
  }
  if (accuracy >= 0) card["testAccuracy"] = accuracy;
  card["parameters"] = store.size();
  nlohmann::ordered_json tensors = nlohmann::ordered_json::array();
  for (const TensorSpec& t : store.layout().tensors()) {
    tensors.push_back({{"name", t.name}, {"shape", t.shape}});
  }
  card["tensors"] = std::move(tensors);
  if (!meta.buffer_values.empty()) {
    nlohmann::ordered_json buffers = nlohmann::ordered_json::array();
    for (const BufferSpec& b : meta.buffer_layout.buffers()) {
      buffers.push_back({{"name", b.name}, {"shape", b.shape}, {"dtype", BufferDTypeName(b.dtype)}});
    }
    card["buffers"] = std::move(buffers);
  }
  return card.dump(2) + "\n";
}

}  // namespace

int ExportCommand(const std::vector<std::string>& args, std::string* out, std::string* err) {
  ExportOptions options;
  Status s = ParseExportFlags(args, &options);
  if (!s.ok()) return Usage(err, s.message());
  if (options.help) {
    *out += ExportUsage();
    return 0;
  }
  const std::string& output = options.output;
  const std::string& checkpoint_arg = options.checkpoint;
  const std::string& run_dir = options.run_dir;
  const std::string& checkpoint_dir = options.checkpoint_dir;
  const std::string& card = options.card;
  const bool make_dirs = options.make_dirs;
  const bool from_file = !checkpoint_arg.empty();
  const bool from_run = !run_dir.empty();
  if (IsDirectory(output)) return Usage(err, "-o " + output + ": is a directory; name a file");
  if (!make_dirs && !IsDirectory(DirName(output))) {
    return Usage(err, "-o " + output + ": directory " + DirName(output) +
                          " does not exist (--mkdir creates it)");
  }
  if (from_file && IsDirectory(checkpoint_arg)) {
    return Usage(
        err, "CHECKPOINT " + checkpoint_arg + " is a directory; for a run directory use --run-dir");
  }
  if (!card.empty() && IsDirectory(card)) return Usage(err, "--card: name a file");
  const double accuracy = options.test_accuracy.value_or(-1);
  // The job is read before anything is written: a bad --job writes nothing.
  TrainingJob job;
  if (!options.job_file.empty()) {
    s = LoadTrainingJob(options.job_file, &job);
    if (!s.ok()) return Fail(err, "--job: " + s.message(), 1);
  }

  // Verify the checkpoint (choosing the newest valid one for --run-dir) and
  // take the numbers to report.
  std::unique_ptr<ParameterStore> store;
  CheckpointMeta meta;
  std::string checkpoint = checkpoint_arg;
  // spec.master.shards: the masters' newest checkpoints, joined; exported
  // from memory (checkpoint names them, for the messages and the card).
  bool sharded = false;
  if (from_file) {
    s = ReadCheckpoint(checkpoint, &store, &meta);
    if (!s.ok()) return Fail(err, CheckpointError(s), 1);
  } else {
    const std::string flag = from_run ? "--run-dir " : "--checkpoint-dir ";
    const std::string given = from_run ? run_dir : checkpoint_dir;
    if (!IsDirectory(given)) return Fail(err, flag + given + ": no such directory", 1);
    // Only read, so a read-only volume (the export pod's) is enough.
    CheckpointDirectory dir(from_run ? LocalJob::CheckpointDir(run_dir) : checkpoint_dir,
                            /*keep=*/1);
    std::vector<std::string> skipped;
    sharded = IsShardedCheckpointDir(dir.dir());
    if (sharded) {
      std::vector<std::string> paths;
      s = ReadShardCheckpoints(dir.dir(), &store, &meta, &paths, &skipped);
      checkpoint.clear();
      for (const std::string& p : paths) checkpoint += (checkpoint.empty() ? "" : ", ") + p;
    } else {
      s = dir.RestoreNewest(&store, &meta, &checkpoint, &skipped);
    }
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
    if (s.code() == Status::Code::kFailedPrecondition) {
      return Fail(err, "the shards in " + dir.dir() + " are not one model: " + s.message(), 1);
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
  const std::string card_text =
      card.empty() ? ""
                   : ModelCard(output, checkpoint, *store, meta,
                               options.job_file.empty() ? nullptr : &job, accuracy);
  const size_t buffers = meta.buffer_values.empty() ? 0 : meta.buffer_layout.buffers().size();
  if (!sharded) store.reset();  // the export reads the file again; hold one copy at a time

  if (make_dirs) {
    s = MakeDirs(DirName(output));
    if (!s.ok()) {
      return Fail(err, "cannot create the directory of " + output + ": " + s.message(), 1);
    }
  }

  s = sharded ? ExportStoreForTorch(*store, meta, output)
              : ExportCheckpointForTorch(checkpoint, output);
  if (!s.ok()) {
    // Errors name their file: the checkpoint's when it changed after it
    // verified (e.g. a running job removed it), else OUT's.
    if (s.message().compare(0, checkpoint.size() + 1, checkpoint + ":") == 0) {
      return Fail(err, CheckpointError(s), 1);
    }
    return Fail(err, "cannot write " + output + ": " + s.message(), 1);
  }
  *out += "wrote " + output + ": " + std::to_string(tensors) + " tensors, " +
          std::to_string(parameters) + " parameters" +
          (buffers > 0 ? ", " + std::to_string(buffers) + " buffers" : "") + " from " +
          checkpoint + " (version " +
          std::to_string(version) + "); in Python: model.load_state_dict(torch.load(" +
          PythonString(output) + "))\n";
  if (!card.empty()) {
    // After the model, so a card never describes a model that is not there.
    if (make_dirs) s = MakeDirs(DirName(card));
    if (s.ok()) s = WriteFileAtomically(card, card_text.data(), card_text.size());
    if (!s.ok()) return Fail(err, "cannot write the model card " + card + ": " + s.message(), 1);
    *out += "wrote " + card + ": the model card\n";
  }
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
