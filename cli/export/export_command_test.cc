// `gaptrain export` on real checkpoints in a temp dir: the .pt read back with
// LibTorch's pickle_load holds the store's names, shapes and exact values;
// --run-dir takes the newest valid checkpoint; every bad input fails with a
// message naming the problem and writes nothing. (checkpoint_torch_test
// loads an export in Python.)

#include "cli/export/export_command.h"

#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "services/engine/parameter_store.h"
#include "services/master/checkpoint.h"
#include "services/testing/test_files.h"
#include "services/testing/tiny_mlp_store.h"

namespace gaptrain {
namespace {

// Overwrites one byte at `offset` from the end.
void Damage(const std::string& path, long offset) {
  FILE* f = std::fopen(path.c_str(), "r+b");
  ASSERT_NE(f, nullptr) << path;
  ASSERT_EQ(std::fseek(f, -offset, SEEK_END), 0);
  const int c = std::fgetc(f);
  ASSERT_EQ(std::fseek(f, -offset, SEEK_END), 0);
  ASSERT_EQ(std::fputc(c ^ 0x5a, f), c ^ 0x5a);
  ASSERT_EQ(std::fclose(f), 0);
}


struct Result {
  int code;
  std::string out, err;
};

Result Export(const std::vector<std::string>& args) {
  Result r;
  r.code = ExportCommand(args, &r.out, &r.err);
  return r;
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The .pt at `path` holds exactly the store's parameters: names in layout
// order, shapes, float32 values bit for bit, nothing else.
void ExpectExportOf(const std::string& path, const ParameterStore& store) {
  const std::string bytes = ReadRaw(path);
  ASSERT_FALSE(bytes.empty()) << path;
  c10::IValue loaded = torch::jit::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
  ASSERT_TRUE(loaded.isGenericDict());
  c10::impl::GenericDict dict = loaded.toGenericDict();
  const auto& specs = store.layout().tensors();
  ASSERT_EQ(dict.size(), specs.size());
  size_t i = 0;
  for (const auto& entry : dict) {
    const TensorSpec& spec = specs[i++];
    EXPECT_EQ(entry.key().toStringRef(), spec.name);
    const at::Tensor t = entry.value().toTensor();
    EXPECT_EQ(t.sizes().vec(), spec.shape) << spec.name;
    ASSERT_EQ(t.scalar_type(), at::kFloat) << spec.name;
    ASSERT_TRUE(t.is_contiguous()) << spec.name;
    ASSERT_EQ(static_cast<size_t>(t.numel()), spec.size) << spec.name;
    EXPECT_EQ(
        std::memcmp(t.data_ptr<float>(), store.params() + spec.offset, spec.size * sizeof(float)),
        0)
        << spec.name;
  }
}

TEST(ExportCommandTest, ExportsACheckpointFile) {
  const std::string dir = TestDir("export_command_test");
  std::unique_ptr<ParameterStore> store = TinyMlpStore(321, 1.0f);
  const std::string checkpoint = dir + "/model.gtc";
  ASSERT_TRUE(WriteCheckpoint(*store, CheckpointMeta(), checkpoint).ok());
  const std::string checkpoint_bytes = ReadRaw(checkpoint);

  const std::string out = dir + "/model.pt";
  Result r = Export({checkpoint, "-o", out});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out, "wrote " + out + ": 4 tensors, 26 parameters from " + checkpoint +
                       " (version 321); in Python: model.load_state_dict(torch.load('" + out +
                       "'))\n");
  ExpectExportOf(out, *store);
  EXPECT_FALSE(PathExists(out + ".tmp"));
  EXPECT_EQ(ReadRaw(checkpoint), checkpoint_bytes);  // only read

  // --output, before CHECKPOINT, replacing an existing file.
  std::unique_ptr<ParameterStore> other = TinyMlpStore(7, 2.5f);
  ASSERT_TRUE(WriteCheckpoint(*other, CheckpointMeta(), checkpoint).ok());
  r = Export({"--output", out, checkpoint});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "(version 7)")) << r.out;
  ExpectExportOf(out, *other);
}

// A model with buffers: the message counts them, the card lists each with
// its dtype, and the state_dict holds them after the parameters.
TEST(ExportCommandTest, BuffersAreExportedAndListedOnTheCard) {
  const std::string dir = TestDir("export_command_test");
  std::unique_ptr<ParameterStore> store = TinyMlpStore(5, 1.0f);
  CheckpointMeta meta;
  ASSERT_TRUE(meta.buffer_layout.Add("bn.running_mean", {2}, BufferDType::kFloat32).ok());
  ASSERT_TRUE(meta.buffer_layout.Add("bn.num_batches_tracked", {}, BufferDType::kInt64).ok());
  meta.buffer_values.assign(16, '\0');
  meta.buffer_values[8] = 3;  // 3 batches
  const std::string checkpoint = dir + "/bn.gtc";
  ASSERT_TRUE(WriteCheckpoint(*store, meta, checkpoint).ok());
  const std::string out = dir + "/bn.pt";
  Result r = Export({checkpoint, "-o", out, "--card", out + ".json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, ": 4 tensors, 26 parameters, 2 buffers from ")) << r.out;
  const nlohmann::json card = nlohmann::json::parse(ReadRaw(out + ".json"));
  EXPECT_EQ(card["buffers"], nlohmann::json::parse(
                                 R"([{"name": "bn.running_mean", "shape": [2], "dtype": "float32"},
                                     {"name": "bn.num_batches_tracked", "shape": [],
                                      "dtype": "int64"}])"));
  const std::string bytes = ReadRaw(out);
  c10::IValue loaded = torch::jit::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
  c10::impl::GenericDict dict = loaded.toGenericDict();
  ASSERT_EQ(dict.size(), 6u);
  const at::Tensor count = dict.at("bn.num_batches_tracked").toTensor();
  EXPECT_EQ(count.scalar_type(), at::kLong);
  EXPECT_EQ(count.item<int64_t>(), 3);
}

TEST(ExportCommandTest, RunDirTakesTheNewestValidCheckpoint) {
  const std::string run = TestDir("export_command_test") + "/runs/mnist";
  CheckpointDirectory checkpoints(run + "/checkpoints", 5);
  std::vector<std::unique_ptr<ParameterStore>> stores;
  for (uint64_t version : {100, 200, 300}) {
    stores.push_back(TinyMlpStore(version, 0.1f * version));
    ASSERT_TRUE(checkpoints.Save(*stores.back(), CheckpointMeta(), nullptr).ok());
  }
  const std::string newest = run + "/checkpoints/" + CheckpointDirectory::FileName(300);
  const std::string older = run + "/checkpoints/" + CheckpointDirectory::FileName(200);
  const std::string out = run + "/model.pt";

  Result r = Export({"--run-dir", run, "-o", out});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_TRUE(Contains(r.out, " from " + newest + " (version 300)")) << r.out;
  ExpectExportOf(out, *stores[2]);

  // A torn newest file is skipped (and said so); the one before it is used.
  ASSERT_EQ(::truncate(newest.c_str(), 100), 0);
  r = Export({"--run-dir", run, "-o", out});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, " from " + older + " (version 200)")) << r.out;
  EXPECT_TRUE(Contains(r.err, "skipped checkpoint " + newest)) << r.err;
  ExpectExportOf(out, *stores[1]);
}

// A cluster job's export: the newest valid checkpoint of a master's
// checkpoint directory (its volume, read-only in the export pod), into a
// directory of the output claim that does not exist yet, with a model card.
TEST(ExportCommandTest, CheckpointDirWithCardIntoNewDirectories) {
  const std::string dir = TestDir("export_command_test");
  const std::string volume = dir + "/checkpoints";  // the claim's root
  CheckpointDirectory checkpoints(volume, 5);
  std::unique_ptr<ParameterStore> older = TinyMlpStore(40, 0.5f);
  std::unique_ptr<ParameterStore> newest = TinyMlpStore(90, 1.5f);
  ASSERT_TRUE(checkpoints.Save(*older, CheckpointMeta(), nullptr).ok());
  ASSERT_TRUE(checkpoints.Save(*newest, CheckpointMeta(), nullptr).ok());
  const std::string job = dir + "/job.yaml";
  WriteRaw(job,
           "apiVersion: gaptrain.io/v1alpha1\nkind: TrainingJob\n"
           "metadata: {name: mnist, namespace: research}\n"
           "spec: {model: {builtin: lenet5}, data: {path: /data/mnist}, training: {epochs: 1}}\n");
  const std::string out = dir + "/models/runs/mnist.pt";
  const std::string card = out + ".json";

  Result r = Export({"--checkpoint-dir", volume, "-o", out, "--mkdir", "--card", card, "--job",
                     job, "--test-accuracy", "0.9871"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_TRUE(Contains(r.out, " from " + volume + "/" + CheckpointDirectory::FileName(90) +
                                  " (version 90)"))
      << r.out;
  EXPECT_TRUE(Contains(r.out, "wrote " + card + ": the model card\n")) << r.out;
  ExpectExportOf(out, *newest);
  const std::string card_text = ReadRaw(card);
  EXPECT_EQ(card_text.back(), '\n');
  EXPECT_EQ(nlohmann::ordered_json::parse(card_text), nlohmann::ordered_json::parse(R"j({
      "format": "pytorch-state-dict",
      "stateDict": "mnist.pt",
      "load": "model.load_state_dict(torch.load('mnist.pt'))",
      "job": {"name": "mnist", "namespace": "research"},
      "model": {"builtin": "lenet5"},
      "data": {"format": "mnist-idx"},
      "version": 90,
      "checkpoint": "ckpt-00000000000000000090.gtc",
      "testAccuracy": 0.9871,
      "parameters": 26,
      "tensors": [{"name": "fc1.weight", "shape": [4, 3]}, {"name": "fc1.bias", "shape": [4]},
                  {"name": "fc2.weight", "shape": [2, 4]}, {"name": "fc2.bias", "shape": [2]}]
    })j"))
      << card_text;

  // Without a checkpoint the volume holds nothing to export.
  const std::string empty = dir + "/empty-volume";
  ASSERT_EQ(::mkdir(empty.c_str(), 0755), 0);
  r = Export({"--checkpoint-dir", empty, "-o", dir + "/x.pt"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(Contains(r.err, "no checkpoint in " + empty)) << r.err;
  r = Export({"--checkpoint-dir", dir + "/absent", "-o", dir + "/x.pt"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(Contains(r.err, "--checkpoint-dir " + dir + "/absent: no such directory")) << r.err;
}

// Each case fails with `code`, says `message`, and leaves no OUT behind.
struct BadCase {
  std::vector<std::string> args;
  int code;
  std::string message;
};

void ExpectFails(const BadCase& c, const std::string& out) {
  std::string joined;
  for (const std::string& a : c.args) joined += " '" + a + "'";
  Result r = Export(c.args);
  EXPECT_EQ(r.code, c.code) << joined << "\n" << r.err;
  EXPECT_TRUE(Contains(r.err, "gaptrain export: " + c.message)) << joined << "\n" << r.err;
  EXPECT_EQ(r.out, "") << joined;
  EXPECT_FALSE(PathExists(out)) << joined;
  EXPECT_FALSE(PathExists(out + ".tmp")) << joined;
}

TEST(ExportCommandTest, BadUsageIsRefused) {
  const std::string dir = TestDir("export_command_test");
  const std::string checkpoint = dir + "/model.gtc";
  ASSERT_TRUE(WriteCheckpoint(*TinyMlpStore(1, 1.0f), CheckpointMeta(), checkpoint).ok());
  const std::string out = dir + "/model.pt";
  const std::vector<BadCase> cases = {
      {{}, 2, "give a CHECKPOINT file or --run-dir DIR"},
      {{"-o", out}, 2, "give a CHECKPOINT file or --run-dir DIR"},
      {{checkpoint, "--run-dir", dir, "-o", out},
       2,
       "give one of CHECKPOINT, --run-dir and --checkpoint-dir"},
      {{"--checkpoint-dir", dir, "--run-dir", dir, "-o", out},
       2,
       "give one of CHECKPOINT, --run-dir and --checkpoint-dir"},
      {{"--checkpoint-dir", "", "-o", out}, 2, "--checkpoint-dir: empty path"},
      {{checkpoint, "-o", out, "--card", dir}, 2, "--card: name a file"},
      {{checkpoint, "-o", out, "--job", "job.yaml"},
       2,
       "--job and --test-accuracy describe the model card: add --card CARD.json"},
      {{checkpoint, "-o", out, "--card", out + ".json", "--test-accuracy", "97"},
       2,
       "--test-accuracy: must be a number in [0, 1], got '97'"},
      {{checkpoint, "-o", out, "--card", out + ".json", "--test-accuracy", "0.9x"},
       2,
       "--test-accuracy: must be a number in [0, 1], got '0.9x'"},
      {{checkpoint, "-o", out, "--card", out + ".json", "--job", dir + "/absent.yaml"},
       1,
       "--job: " + dir + "/absent.yaml: cannot read: No such file or directory"},
      {{checkpoint, checkpoint, "-o", out}, 2, "unexpected argument '" + checkpoint + "'"},
      {{checkpoint}, 2, "missing -o OUT.pt"},
      {{checkpoint, "-o"}, 2, "-o: needs a value"},
      {{checkpoint, "-o", ""}, 2, "-o: empty path"},
      {{checkpoint, "-o", out, "--output", out}, 2, "-o/--output: given twice"},
      {{checkpoint, "-o", out, "--format", "onnx"}, 2, "unknown flag '--format'"},
      {{"", "-o", out}, 2, "CHECKPOINT: empty path"},
      {{"--run-dir", "", "-o", out}, 2, "--run-dir: empty path"},
      {{checkpoint, "-o", dir}, 2, "-o " + dir + ": is a directory"},
      {{checkpoint, "-o", dir + "/absent/model.pt"},
       2,
       "-o " + dir + "/absent/model.pt: directory " + dir +
           "/absent does not exist (--mkdir creates it)"},
      {{dir, "-o", out},
       2,
       "CHECKPOINT " + dir + " is a directory; for a run directory use --run-dir"},
  };
  for (const BadCase& c : cases) ExpectFails(c, out);

  // Exporting over the checkpoint itself would destroy it.
  Result r = Export({checkpoint, "-o", checkpoint});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(Contains(r.err, "-o " + checkpoint + ": is the checkpoint itself")) << r.err;
  std::unique_ptr<ParameterStore> still;
  EXPECT_TRUE(ReadCheckpoint(checkpoint, &still, nullptr).ok());

  r = Export({"--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(Contains(r.out, "usage: gaptrain export CHECKPOINT -o OUT.pt")) << r.out;
}

TEST(ExportCommandTest, MissingOrCorruptCheckpointIsAnError) {
  const std::string dir = TestDir("export_command_test");
  const std::string out = dir + "/model.pt";
  const std::string flipped = dir + "/flipped.gtc";
  const std::string torn = dir + "/torn.gtc";
  ASSERT_TRUE(WriteCheckpoint(*TinyMlpStore(5, 1.0f), CheckpointMeta(), flipped).ok());
  ASSERT_TRUE(WriteCheckpoint(*TinyMlpStore(5, 1.0f), CheckpointMeta(), torn).ok());
  Damage(flipped, 20);  // a parameter byte: only the CRC notices
  ASSERT_EQ(::truncate(torn.c_str(), 60), 0);

  const std::vector<BadCase> cases = {
      {{dir + "/absent.gtc", "-o", out}, 1, "no such checkpoint: " + dir + "/absent.gtc"},
      {{flipped, "-o", out}, 1, "corrupt checkpoint (torn or damaged; not exported): " + flipped},
      {{torn, "-o", out}, 1, "corrupt checkpoint (torn or damaged; not exported): " + torn},
  };
  for (const BadCase& c : cases) ExpectFails(c, out);
}

TEST(ExportCommandTest, RunDirWithoutAValidCheckpointIsAnError) {
  const std::string dir = TestDir("export_command_test");
  const std::string out = dir + "/model.pt";
  const std::string empty_run = dir + "/empty";  // no checkpoints/ yet
  ASSERT_EQ(::mkdir(empty_run.c_str(), 0755), 0);
  const std::string bad_run = dir + "/bad";
  CheckpointDirectory checkpoints(bad_run + "/checkpoints", 5);
  for (uint64_t version : {10, 20}) {
    ASSERT_TRUE(checkpoints.Save(*TinyMlpStore(version, 1.0f), CheckpointMeta(), nullptr).ok());
    Damage(bad_run + "/checkpoints/" + CheckpointDirectory::FileName(version), 20);
  }

  const std::vector<BadCase> cases = {
      {{"--run-dir", dir + "/absent", "-o", out},
       1,
       "--run-dir " + dir + "/absent: no such directory"},
      {{"--run-dir", empty_run, "-o", out}, 1, "no checkpoint in " + empty_run + "/checkpoints"},
      {{"--run-dir", bad_run, "-o", out},
       1,
       "no valid checkpoint in " + bad_run + "/checkpoints: every one is corrupt"},
  };
  for (const BadCase& c : cases) ExpectFails(c, out);
  Result r = Export({"--run-dir", bad_run, "-o", out});
  EXPECT_TRUE(Contains(r.err, CheckpointDirectory::FileName(20))) << r.err;  // names the file
}

}  // namespace
}  // namespace gaptrain
