// Checkpoint parameters as LibTorch tensors, and the export that Debian's
// Python torch (/usr/bin/python3, python3-torch, as the worker's test data
// also needs) loads with torch.load into a state_dict that
// torch.nn.Linear layers accept.

#include "services/master/checkpoint_torch.h"

#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>
#include <ATen/ops/equal.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "services/engine/parameter_store.h"
#include "services/master/checkpoint.h"
#include "services/testing/test_files.h"
#include "services/testing/tiny_mlp_store.h"

namespace gaptrain {
namespace {

using Code = Status::Code;
using Named = std::vector<std::pair<std::string, at::Tensor>>;


// fc2(relu(fc1(x))) for x = (1, -2, 0.5), from the flat parameters.
std::vector<float> MlpForward(const float* p) {
  const float x[3] = {1.0f, -2.0f, 0.5f};
  const float* w1 = p;
  const float* b1 = p + 12;
  const float* w2 = p + 16;
  const float* b2 = p + 24;
  float h[4];
  for (int i = 0; i < 4; ++i) {
    float s = b1[i];
    for (int j = 0; j < 3; ++j) s += w1[i * 3 + j] * x[j];
    h[i] = s > 0.0f ? s : 0.0f;
  }
  std::vector<float> y(2);
  for (int i = 0; i < 2; ++i) {
    float s = b2[i];
    for (int j = 0; j < 4; ++j) s += w2[i * 4 + j] * h[j];
    y[i] = s;
  }
  return y;
}

// Runs `script` with Debian's python3; returns its exit status and output.
int RunPython(const std::string& dir, const std::string& script, const std::string& args,
              std::string* output) {
  const std::string path = dir + "/check.py";
  WriteRaw(path, script);
  const std::string cmd = "/usr/bin/python3 '" + path + "' " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) output->append(buf, n);
  int status = ::pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Loads the export, checks keys, shapes and every value's bits against
// the raw float32 file, loads it into built-in modules and runs them.
constexpr char kCheckScript[] = R"PY(
import array, collections, sys
import torch

sd = torch.load(sys.argv[1])
assert isinstance(sd, dict), type(sd)
assert list(sd.keys()) == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"], list(sd.keys())
shapes = {k: tuple(v.shape) for k, v in sd.items()}
assert shapes == {"fc1.weight": (4, 3), "fc1.bias": (4,), "fc2.weight": (2, 4),
                  "fc2.bias": (2,)}, shapes
for k, v in sd.items():
    assert v.dtype == torch.float32, (k, v.dtype)
flat = torch.cat([v.reshape(-1) for v in sd.values()])
with open(sys.argv[2], "rb") as f:
    expected = torch.tensor(array.array("f", f.read()), dtype=torch.float32)
assert flat.numel() == expected.numel(), (flat.numel(), expected.numel())
assert torch.equal(flat.view(torch.int32), expected.view(torch.int32)), (flat, expected)

model = torch.nn.Sequential(collections.OrderedDict(
    fc1=torch.nn.Linear(3, 4), relu=torch.nn.ReLU(), fc2=torch.nn.Linear(4, 2)))
model.load_state_dict(sd)  # strict: every key, no extras
assert torch.equal(model.fc2.bias.detach(), sd["fc2.bias"])
with torch.no_grad():
    y = model(torch.tensor([[1.0, -2.0, 0.5]]))
print("Y %.9g %.9g" % (y[0, 0].item(), y[0, 1].item()))
print("fc1.weight[0][0] = %.9g" % sd["fc1.weight"][0][0].item())
print("OK")
)PY";

TEST(CheckpointTorchTest, LoadsNamedTensorsWithTheLayoutsShapes) {
  const std::string dir = TestDir("checkpoint_torch_test");
  std::unique_ptr<ParameterStore> store = TinyMlpStore(321, 1.0f);
  const std::string path = dir + "/model.gtc";
  ASSERT_TRUE(WriteCheckpoint(*store, CheckpointMeta(), path).ok());

  Named tensors;
  Status s = LoadCheckpointTensors(path, &tensors);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(tensors.size(), 4u);
  const auto& specs = store->layout().tensors();
  for (size_t i = 0; i < specs.size(); ++i) {
    const at::Tensor& t = tensors[i].second;
    EXPECT_EQ(tensors[i].first, specs[i].name);
    EXPECT_EQ(t.sizes().vec(), specs[i].shape) << specs[i].name;
    EXPECT_EQ(t.scalar_type(), at::kFloat);
    EXPECT_TRUE(t.is_contiguous());
    EXPECT_TRUE(t.device().is_cpu());
    ASSERT_EQ(static_cast<size_t>(t.numel()), specs[i].size);
    EXPECT_EQ(std::memcmp(t.data_ptr<float>(), store->params() + specs[i].offset,
                          specs[i].size * sizeof(float)),
              0)
        << specs[i].name;
  }
  EXPECT_FLOAT_EQ(tensors[1].second[2].item<float>(), store->params()[14]);
  // Each tensor owns its memory.
  EXPECT_NE(tensors[0].second.data_ptr<float>() + 12, tensors[1].second.data_ptr<float>());
}

TEST(CheckpointTorchTest, ZeroDimensionalTensor) {
  ParameterLayout layout;
  ASSERT_TRUE(layout.Add("temperature", {}).ok());
  ASSERT_TRUE(layout.Add("empty", {0, 3}).ok());
  ASSERT_TRUE(layout.Add("w", {2}).ok());
  ParameterStore store(std::move(layout));
  store.params()[0] = 0.25f;
  store.params()[1] = -1.0f;
  store.params()[2] = 2.0f;
  Named tensors;
  ASSERT_TRUE(StoreTensors(store, &tensors).ok());
  ASSERT_EQ(tensors.size(), 3u);
  EXPECT_EQ(tensors[0].second.dim(), 0);
  EXPECT_EQ(tensors[0].second.item<float>(), 0.25f);
  EXPECT_EQ(tensors[1].second.sizes().vec(), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(tensors[2].second[1].item<float>(), 2.0f);
}

TEST(CheckpointTorchTest, CorruptOrMissingCheckpointIsAnError) {
  const std::string dir = TestDir("checkpoint_torch_test");
  const std::string path = dir + "/model.gtc";
  ASSERT_TRUE(WriteCheckpoint(*TinyMlpStore(321, 1.0f), CheckpointMeta(), path).ok());
  FILE* f = std::fopen(path.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fseek(f, -20, SEEK_END), 0);
  ASSERT_EQ(std::fputc('!', f), '!');
  ASSERT_EQ(std::fclose(f), 0);

  Named tensors;
  Status s = LoadCheckpointTensors(path, &tensors);
  EXPECT_EQ(s.code(), Code::kDataLoss) << s.ToString();
  EXPECT_TRUE(tensors.empty());
  const std::string out = dir + "/model.pt";
  s = ExportCheckpointForTorch(path, out);
  EXPECT_EQ(s.code(), Code::kDataLoss) << s.ToString();
  EXPECT_NE(s.message().find(path), std::string::npos);
  EXPECT_FALSE(PathExists(out));
  EXPECT_FALSE(PathExists(out + ".tmp"));
  EXPECT_EQ(ExportCheckpointForTorch(dir + "/absent.gtc", out).code(), Code::kNotFound);
}

TEST(CheckpointTorchTest, PythonTorchLoadReadsTheExport) {
  const std::string dir = TestDir("checkpoint_torch_test");
  std::unique_ptr<ParameterStore> store = TinyMlpStore(321, 1.0f);
  const std::string checkpoint = dir + "/model.gtc";
  ASSERT_TRUE(WriteCheckpoint(*store, CheckpointMeta(), checkpoint).ok());
  const std::string out = dir + "/model.pt";
  Status s = ExportCheckpointForTorch(checkpoint, out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_FALSE(PathExists(out + ".tmp"));

  const std::string expected = dir + "/expected.f32";
  WriteRaw(expected, std::string(reinterpret_cast<const char*>(store->params()),
                                 store->size() * sizeof(float)));
  std::string output;
  int rc = RunPython(dir, kCheckScript, "'" + out + "' '" + expected + "'", &output);
  ASSERT_EQ(rc, 0) << "python3 failed:\n" << output;
  ASSERT_NE(output.find("\nOK"), std::string::npos) << output;
  std::printf("%s", output.c_str());

  // Python's forward pass agrees with one over the store's parameters.
  size_t at = output.find("Y ");
  ASSERT_NE(at, std::string::npos) << output;
  std::istringstream in(output.substr(at + 2));
  float y0 = 0.0f;
  float y1 = 0.0f;
  ASSERT_TRUE(in >> y0 >> y1) << output;
  const std::vector<float> y = MlpForward(store->params());
  EXPECT_NEAR(y0, y[0], 1e-5f);
  EXPECT_NEAR(y1, y[1], 1e-5f);

  // LibTorch reads it back too (torch::pickle_load), in layout order.
  std::string bytes;
  {
    FILE* f = std::fopen(out.c_str(), "rb");
    ASSERT_NE(f, nullptr);
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.append(buf, n);
    std::fclose(f);
  }
  c10::IValue loaded = torch::jit::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
  ASSERT_TRUE(loaded.isGenericDict());
  Named tensors;
  ASSERT_TRUE(LoadCheckpointTensors(checkpoint, &tensors).ok());
  c10::impl::GenericDict dict = loaded.toGenericDict();
  ASSERT_EQ(dict.size(), tensors.size());
  size_t i = 0;
  for (const auto& entry : dict) {
    EXPECT_EQ(entry.key().toStringRef(), tensors[i].first);
    EXPECT_TRUE(at::equal(entry.value().toTensor(), tensors[i].second)) << tensors[i].first;
    ++i;
  }
}

// A BatchNorm model's checkpoint: the export holds the master's running
// statistics with their dtypes (num_batches_tracked an int64), so a plain
// PyTorch module takes it with load_state_dict(strict=True) and evaluates
// with those statistics.
TEST(CheckpointTorchTest, BatchNormBuffersLoadStrictlyIntoAPythonModule) {
  const std::string dir = TestDir("checkpoint_torch_test");
  ParameterLayout layout;
  ASSERT_TRUE(layout.Add("0.weight", {2, 3}).ok());
  ASSERT_TRUE(layout.Add("0.bias", {2}).ok());
  ASSERT_TRUE(layout.Add("1.weight", {2}).ok());
  ASSERT_TRUE(layout.Add("1.bias", {2}).ok());
  ParameterStore store(std::move(layout));
  for (size_t i = 0; i < store.size(); ++i) store.params()[i] = 0.25f * i - 1.0f;
  CheckpointMeta meta;
  ASSERT_TRUE(meta.buffer_layout.Add("1.running_mean", {2}, BufferDType::kFloat32).ok());
  ASSERT_TRUE(meta.buffer_layout.Add("1.running_var", {2}, BufferDType::kFloat32).ok());
  ASSERT_TRUE(meta.buffer_layout.Add("1.num_batches_tracked", {}, BufferDType::kInt64).ok());
  const float mean[2] = {0.5f, -2.0f}, var[2] = {4.0f, 0.25f};
  const int64_t batches = 123456789012LL;  // beyond a float's exact range
  meta.buffer_values.assign(reinterpret_cast<const char*>(mean), 8);
  meta.buffer_values.append(reinterpret_cast<const char*>(var), 8);
  meta.buffer_values.append(reinterpret_cast<const char*>(&batches), 8);
  const std::string checkpoint = dir + "/bn.gtc";
  ASSERT_TRUE(WriteCheckpoint(store, meta, checkpoint).ok());
  const std::string out = dir + "/bn.pt";
  ASSERT_TRUE(ExportCheckpointForTorch(checkpoint, out).ok());

  Named tensors;
  ASSERT_TRUE(LoadCheckpointTensors(checkpoint, &tensors).ok());
  ASSERT_EQ(tensors.size(), 7u);
  EXPECT_EQ(tensors[6].first, "1.num_batches_tracked");
  EXPECT_EQ(tensors[6].second.scalar_type(), at::kLong);
  EXPECT_EQ(tensors[6].second.dim(), 0);

  const std::string script = R"PY(
import sys, torch
sd = torch.load(sys.argv[1])
model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
model.load_state_dict(sd, strict=True)
assert sd["1.num_batches_tracked"].dtype == torch.int64
assert sd["1.num_batches_tracked"].item() == 123456789012
model.eval()
with torch.no_grad():
    y = model(torch.tensor([[1.0, 2.0, 3.0]]))
# By hand: linear, then (x - mean) / sqrt(var + eps) * weight + bias.
w = sd["0.weight"]; b = sd["0.bias"]
x = torch.tensor([1.0, 2.0, 3.0]) @ w.t() + b
want = (x - sd["1.running_mean"]) / torch.sqrt(sd["1.running_var"] + 1e-5) * sd["1.weight"] + sd["1.bias"]
assert torch.allclose(y[0], want), (y, want)
print("OK")
)PY";
  std::string output;
  ASSERT_EQ(RunPython(dir, script, "'" + out + "'", &output), 0) << output;
  EXPECT_NE(output.find("OK"), std::string::npos) << output;
}

}  // namespace
}  // namespace gaptrain
