// Checkpoints: bit-identical round trips (NaN payloads, -0, bf16 included),
// the documented byte layout, torn and corrupt files (every truncation, 200
// random byte flips, forged headers with a valid CRC), the directory of the
// last K, an UpdateEngine resumed from a checkpoint that ends bit-identical
// to one that never stopped, and the speed of a 25M-parameter store.

#include "services/master/checkpoint.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "proto/gaptrain.pb.h"
#include "services/engine/parameter_layout.h"
#include "services/engine/parameter_store.h"
#include "services/engine/update_engine.h"
#include "services/master/layout_proto.h"

namespace gaptrain {
namespace {

using Code = Status::Code;

// A fresh directory under TEST_TMPDIR named after the running test.
std::string TestDir() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  for (char& c : name) {
    if (c == '/') c = '_';  // parameterised tests: "Name/fp32"
  }
  std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/checkpoint_test_" + name;
  std::string cmd = "rm -rf '" + dir + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_EQ(::mkdir(dir.c_str(), 0755), 0) << dir;
  return dir;
}

std::string ReadRaw(const std::string& path) {
  std::string out;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return out;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

void WriteRaw(const std::string& path, const std::string& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  ASSERT_EQ(std::fclose(f), 0);
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

uint32_t Get32(const std::string& s, size_t at) {
  uint32_t v;
  std::memcpy(&v, s.data() + at, 4);
  return v;
}
uint64_t Get64(const std::string& s, size_t at) {
  uint64_t v;
  std::memcpy(&v, s.data() + at, 8);
  return v;
}
void Put32(std::string* s, size_t at, uint32_t v) { std::memcpy(&(*s)[at], &v, 4); }
void Put64(std::string* s, size_t at, uint64_t v) { std::memcpy(&(*s)[at], &v, 8); }

uint32_t Crc(const std::string& bytes, size_t n) {
  return static_cast<uint32_t>(crc32_z(0, reinterpret_cast<const Bytef*>(bytes.data()), n));
}

// Fills raw memory with random bits: NaNs with payloads, infinities,
// denormals and -0 all occur, so only a byte-exact round trip passes.
void FillRandomBits(void* data, size_t bytes, std::mt19937* rng) {
  unsigned char* p = static_cast<unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>((*rng)() & 0xFF);
}

ParameterLayout SmallLayout() {
  ParameterLayout layout;
  EXPECT_TRUE(layout.Add("fc1.weight", {4, 3}).ok());
  EXPECT_TRUE(layout.Add("fc1.bias", {4}).ok());
  EXPECT_TRUE(layout.Add("scale", {}).ok());  // 0-d: one value
  return layout;                              // P = 17
}

ParameterLayout MediumLayout() {
  ParameterLayout layout;
  EXPECT_TRUE(layout.Add("enc.weight", {24, 25}).ok());
  EXPECT_TRUE(layout.Add("enc.bias", {7}).ok());
  EXPECT_TRUE(layout.Add("dec.weight", {13, 30}).ok());
  return layout;  // P = 997
}

// A store as the Gap-Aware rule leaves it, with random contents.
std::unique_ptr<ParameterStore> MakeStore(ParameterLayout layout, uint32_t seed,
                                          uint64_t version = 1234) {
  auto store = std::make_unique<ParameterStore>(std::move(layout));
  std::mt19937 rng(seed);
  FillRandomBits(store->params(), store->size() * sizeof(float), &rng);
  for (const char* name : {"momentum", "gap/step_sq_avg", "worker/7/copy"}) {
    FlatBuffer* b = store->AddBuffer(name, DType::kFloat32);
    FillRandomBits(b->data(), b->bytes(), &rng);
  }
  FlatBuffer* b = store->AddBuffer("worker/3/copy", DType::kBfloat16);
  FillRandomBits(b->data(), b->bytes(), &rng);
  store->set_scalar("gap/feeds", 977.0);
  store->set_scalar("gap/eta_max", 0.1 + seed * 1e-9);
  store->set_scalar("negative_zero", -0.0);
  store->set_version(version);
  return store;
}

CheckpointMeta Meta() {
  CheckpointMeta meta;
  meta.job_name = "mnist-ga";
  meta.rule = "gap-aware";
  meta.created_unix_ms = 1700000000123ULL;
  meta.workers = {3, 7};
  return meta;
}

bool SameBits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Layout, version, parameters, every buffer and scalar, byte for byte.
void ExpectIdentical(const ParameterStore& a, const ParameterStore& b) {
  EXPECT_TRUE(a.layout() == b.layout());
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(a.version(), b.version());
  EXPECT_EQ(std::memcmp(a.params(), b.params(), a.size() * sizeof(float)), 0) << "params";
  ASSERT_EQ(a.buffers().size(), b.buffers().size());
  for (const auto& [name, buf] : a.buffers()) {
    const FlatBuffer* other = b.buffer(name);
    ASSERT_NE(other, nullptr) << name;
    EXPECT_EQ(buf.dtype(), other->dtype()) << name;
    ASSERT_EQ(buf.bytes(), other->bytes()) << name;
    EXPECT_EQ(std::memcmp(buf.data(), other->data(), buf.bytes()), 0) << name;
  }
  ASSERT_EQ(a.scalars().size(), b.scalars().size());
  for (const auto& [name, value] : a.scalars()) {
    ASSERT_EQ(b.scalars().count(name), 1u) << name;
    EXPECT_TRUE(SameBits(value, b.scalars().at(name))) << name;
  }
}

void ExpectSameMeta(const CheckpointMeta& a, const CheckpointMeta& b) {
  EXPECT_EQ(a.job_name, b.job_name);
  EXPECT_EQ(a.rule, b.rule);
  EXPECT_EQ(a.created_unix_ms, b.created_unix_ms);
  EXPECT_EQ(a.workers, b.workers);
}

// Reading `path` fails with DATA_LOSS naming the file.
void ExpectDataLoss(const std::string& path, const std::string& what) {
  std::unique_ptr<ParameterStore> store;
  CheckpointMeta meta;
  meta.job_name = "untouched";
  Status s = ReadCheckpoint(path, &store, &meta);
  EXPECT_EQ(s.code(), Code::kDataLoss) << what << ": " << s.ToString();
  EXPECT_NE(s.message().find(path), std::string::npos) << what << ": " << s.message();
  EXPECT_EQ(store, nullptr) << what;
  EXPECT_EQ(meta.job_name, "untouched") << what;
}

// Writes a well-formed small checkpoint and returns its bytes.
std::string SmallCheckpointBytes(const std::string& path) {
  std::unique_ptr<ParameterStore> store = MakeStore(SmallLayout(), 5);
  Status s = WriteCheckpoint(*store, Meta(), path);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return ReadRaw(path);
}

// A file in the documented format with an arbitrary header and data and a
// correct CRC: what a buggy or malicious writer could produce.
std::string ForgeFile(const proto::CheckpointHeader& header, const std::string& data) {
  std::string h;
  EXPECT_TRUE(header.SerializeToString(&h));
  std::string out("\x89GTCKPT\n", 8);
  out.resize(24);
  Put32(&out, 8, 1);
  Put32(&out, 12, static_cast<uint32_t>(h.size()));
  Put64(&out, 16, data.size());
  out += h;
  out += data;
  std::string trailer(12, '\0');
  Put32(&trailer, 0, Crc(out, out.size()));
  std::memcpy(&trailer[4], "\nTPKCTG\x89", 8);
  return out + trailer;
}

// ---------------------------------------------------------------------------
// Round trip and format

TEST(CheckpointTest, RoundTripIsBitIdentical) {
  const std::string dir = TestDir();
  const std::string path = dir + "/model.gtc";
  std::unique_ptr<ParameterStore> store = MakeStore(MediumLayout(), 1);
  ASSERT_TRUE(WriteCheckpoint(*store, Meta(), path).ok());
  EXPECT_FALSE(Exists(path + ".tmp"));

  std::unique_ptr<ParameterStore> loaded;
  CheckpointMeta meta;
  Status s = ReadCheckpoint(path, &loaded, &meta);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_NE(loaded, nullptr);
  ExpectIdentical(*store, *loaded);
  ExpectSameMeta(Meta(), meta);
  EXPECT_EQ(loaded->buffer("worker/3/copy")->dtype(), DType::kBfloat16);
  EXPECT_EQ(loaded->buffer("momentum")->dtype(), DType::kFloat32);
  EXPECT_EQ(loaded->layout().tensors()[2].name, "dec.weight");
  EXPECT_EQ(loaded->layout().tensors()[2].shape, (std::vector<int64_t>{13, 30}));

  // meta is optional.
  std::unique_ptr<ParameterStore> again;
  ASSERT_TRUE(ReadCheckpoint(path, &again, nullptr).ok());
  ExpectIdentical(*store, *again);
}

// The module's buffers (a BatchNorm's statistics and its int64 count)
// come back byte for byte with their layout and merge count; a file with
// none (as from before they were kept) has an empty layout and no values.
TEST(CheckpointTest, ModuleBuffersRoundTrip) {
  const std::string path = TestDir() + "/buffers.gtc";
  std::unique_ptr<ParameterStore> store = MakeStore(SmallLayout(), 2);
  CheckpointMeta written = Meta();
  ASSERT_TRUE(written.buffer_layout.Add("bn.running_mean", {3}, BufferDType::kFloat32).ok());
  ASSERT_TRUE(written.buffer_layout.Add("bn.num_batches_tracked", {}, BufferDType::kInt64).ok());
  written.buffer_values = std::string("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c"
                                      "\x0d\x0e\x0f\x10\x11\x12\x13\x14", 20);
  written.buffer_merges = 9;
  ASSERT_TRUE(WriteCheckpoint(*store, written, path).ok());
  std::unique_ptr<ParameterStore> loaded;
  CheckpointMeta meta;
  ASSERT_TRUE(ReadCheckpoint(path, &loaded, &meta).ok());
  ExpectIdentical(*store, *loaded);
  EXPECT_EQ(meta.buffer_layout, written.buffer_layout);
  EXPECT_EQ(meta.buffer_values, written.buffer_values);
  EXPECT_EQ(meta.buffer_merges, 9u);

  // Values that do not fit their layout are not written.
  written.buffer_values.pop_back();
  const Status refused = WriteCheckpoint(*store, written, path + ".bad");
  EXPECT_EQ(refused.code(), Code::kInvalidArgument) << refused.ToString();

  ASSERT_TRUE(WriteCheckpoint(*store, Meta(), path).ok());
  ASSERT_TRUE(ReadCheckpoint(path, &loaded, &meta).ok());
  EXPECT_TRUE(meta.buffer_layout.empty());
  EXPECT_EQ(meta.buffer_values, "");
}

TEST(CheckpointTest, StoreWithoutStateRoundTrips) {
  const std::string path = TestDir() + "/plain.gtc";
  ParameterStore store(SmallLayout());
  for (size_t i = 0; i < store.size(); ++i) store.params()[i] = 0.5f * i - 3.0f;
  ASSERT_TRUE(WriteCheckpoint(store, CheckpointMeta(), path).ok());
  std::unique_ptr<ParameterStore> loaded;
  CheckpointMeta meta;
  ASSERT_TRUE(ReadCheckpoint(path, &loaded, &meta).ok());
  ExpectIdentical(store, *loaded);
  ExpectSameMeta(CheckpointMeta(), meta);
}

TEST(CheckpointTest, OverwriteReplacesTheFile) {
  const std::string path = TestDir() + "/model.gtc";
  ASSERT_TRUE(WriteCheckpoint(*MakeStore(SmallLayout(), 1, 10), Meta(), path).ok());
  std::unique_ptr<ParameterStore> second = MakeStore(MediumLayout(), 2, 20);
  ASSERT_TRUE(WriteCheckpoint(*second, Meta(), path).ok());
  std::unique_ptr<ParameterStore> loaded;
  ASSERT_TRUE(ReadCheckpoint(path, &loaded, nullptr).ok());
  ExpectIdentical(*second, *loaded);
}

// The bytes are as checkpoint.h documents them.
TEST(CheckpointTest, FileFollowsTheDocumentedLayout) {
  const std::string path = TestDir() + "/model.gtc";
  std::unique_ptr<ParameterStore> store = MakeStore(SmallLayout(), 9);
  ASSERT_TRUE(WriteCheckpoint(*store, Meta(), path).ok());
  const std::string f = ReadRaw(path);
  const size_t p = store->size();

  ASSERT_GE(f.size(), 36u);
  EXPECT_EQ(f.substr(0, 8), std::string("\x89GTCKPT\n", 8));
  EXPECT_EQ(Get32(f, 8), 1u);
  const uint32_t h = Get32(f, 12);
  const uint64_t d = Get64(f, 16);
  EXPECT_EQ(d, p * 4 + 3 * p * 4 + p * 2);  // params, 3 fp32 buffers, 1 bf16
  ASSERT_EQ(f.size(), 36 + h + d);
  EXPECT_EQ(Get32(f, 24 + h + d), Crc(f, 24 + h + d));
  EXPECT_EQ(f.substr(28 + h + d), std::string("\nTPKCTG\x89", 8));

  proto::CheckpointHeader header;
  ASSERT_TRUE(header.ParseFromString(f.substr(24, h)));
  EXPECT_EQ(header.job_name(), "mnist-ga");
  EXPECT_EQ(header.rule(), "gap-aware");
  EXPECT_EQ(header.version(), 1234u);
  EXPECT_EQ(header.created_unix_ms(), 1700000000123ULL);
  EXPECT_EQ(header.workers_size(), 2);
  EXPECT_EQ(header.layout().tensors_size(), 3);
  EXPECT_EQ(header.scalars_size(), 3);
  ASSERT_EQ(header.buffers_size(), 4);

  // Parameters first, then the buffers in descriptor order.
  size_t at = 24 + h;
  EXPECT_EQ(std::memcmp(f.data() + at, store->params(), p * 4), 0);
  at += p * 4;
  for (const proto::CheckpointBuffer& b : header.buffers()) {
    const FlatBuffer* buf = store->buffer(b.name());
    ASSERT_NE(buf, nullptr) << b.name();
    EXPECT_EQ(b.byte_length(), buf->bytes());
    EXPECT_EQ(b.dtype(), buf->dtype() == DType::kFloat32 ? proto::CHECKPOINT_DTYPE_FP32
                                                         : proto::CHECKPOINT_DTYPE_BF16);
    EXPECT_EQ(std::memcmp(f.data() + at, buf->data(), buf->bytes()), 0) << b.name();
    at += buf->bytes();
  }
  EXPECT_EQ(at, 24 + h + d);
}

TEST(CheckpointTest, WriteErrorsNameThePathAndLeaveNoTemp) {
  const std::string dir = TestDir();
  std::unique_ptr<ParameterStore> store = MakeStore(SmallLayout(), 1);

  const std::string missing = dir + "/no/such/dir/model.gtc";
  Status s = WriteCheckpoint(*store, Meta(), missing);
  EXPECT_EQ(s.code(), Code::kNotFound) << s.ToString();
  EXPECT_NE(s.message().find(missing), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("No such file"), std::string::npos) << s.message();

  // proto3 strings must be UTF-8, or the header would not parse back.
  store->AddBuffer("bad\xff", DType::kFloat32);
  const std::string path = dir + "/model.gtc";
  s = WriteCheckpoint(*store, Meta(), path);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  EXPECT_FALSE(Exists(path));
  EXPECT_FALSE(Exists(path + ".tmp"));

  ParameterStore empty{ParameterLayout()};
  s = WriteCheckpoint(empty, Meta(), path);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  EXPECT_FALSE(Exists(path + ".tmp"));

  // Renaming over a directory fails after the temp file was written.
  ASSERT_EQ(::mkdir((dir + "/taken.gtc").c_str(), 0755), 0);
  s = WriteCheckpoint(*MakeStore(SmallLayout(), 1), Meta(), dir + "/taken.gtc");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(dir + "/taken.gtc"), std::string::npos) << s.message();
  EXPECT_FALSE(Exists(dir + "/taken.gtc.tmp"));
}

TEST(CheckpointTest, MissingFileIsNotFound) {
  const std::string path = TestDir() + "/absent.gtc";
  std::unique_ptr<ParameterStore> store;
  Status s = ReadCheckpoint(path, &store, nullptr);
  EXPECT_EQ(s.code(), Code::kNotFound) << s.ToString();
  EXPECT_NE(s.message().find(path), std::string::npos);
}

// ---------------------------------------------------------------------------
// Torn and corrupt files

TEST(CheckpointTest, TornFilesAreDataLoss) {
  const std::string dir = TestDir();
  const std::string good = dir + "/good.gtc";
  const std::string f = SmallCheckpointBytes(good);
  const uint32_t h = Get32(f, 12);
  const uint64_t d = Get64(f, 16);
  const std::string torn = dir + "/torn.gtc";

  const std::map<std::string, size_t> cuts = {
      {"empty", 0},
      {"inside the magic", 5},
      {"inside the lengths", 20},
      {"at the header", 24},
      {"inside the header", 24 + h / 2},
      {"at the data", 24 + h},
      {"inside the parameters", 24 + h + 10},
      {"inside the buffers", 24 + h + d / 2},
      {"inside the CRC", 24 + h + d + 2},
      {"inside the end magic", 24 + h + d + 7},
      {"last byte missing", f.size() - 1},
  };
  for (const auto& [what, size] : cuts) {
    ASSERT_LT(size, f.size()) << what;
    WriteRaw(torn, f.substr(0, size));
    ExpectDataLoss(torn, what);
  }
  // Every other length too (the file is small).
  for (size_t size = 0; size < f.size(); ++size) {
    WriteRaw(torn, f.substr(0, size));
    std::unique_ptr<ParameterStore> store;
    Status s = ReadCheckpoint(torn, &store, nullptr);
    ASSERT_EQ(s.code(), Code::kDataLoss) << "cut at " << size << ": " << s.ToString();
  }
  // Bytes appended after the end are corruption as well.
  WriteRaw(torn, f + "x");
  ExpectDataLoss(torn, "trailing byte");

  std::unique_ptr<ParameterStore> store;
  EXPECT_TRUE(ReadCheckpoint(good, &store, nullptr).ok());
}

TEST(CheckpointTest, EmptyFileMessage) {
  const std::string path = TestDir() + "/empty.gtc";
  WriteRaw(path, "");
  std::unique_ptr<ParameterStore> store;
  Status s = ReadCheckpoint(path, &store, nullptr);
  EXPECT_EQ(s.code(), Code::kDataLoss);
  EXPECT_EQ(s.message(), path + ": file is empty");
}

TEST(CheckpointTest, FlippedBytesAreDataLoss) {
  const std::string dir = TestDir();
  const std::string f = SmallCheckpointBytes(dir + "/good.gtc");
  const uint32_t h = Get32(f, 12);
  const uint64_t d = Get64(f, 16);
  const std::string bad = dir + "/bad.gtc";

  const std::map<std::string, size_t> positions = {
      {"magic", 0},
      {"format version", 8},
      {"header length", 12},
      {"data length", 16},
      {"header start", 24},
      {"header middle", 24 + h / 2},
      {"header end", 24 + h - 1},
      {"first parameter", 24 + h},
      {"buffers", 24 + h + d / 2},
      {"last data byte", 24 + h + d - 1},
      {"CRC", 24 + h + d + 1},
      {"end magic", f.size() - 1},
  };
  for (const auto& [what, pos] : positions) {
    std::string g = f;
    g[pos] ^= 0x01;
    WriteRaw(bad, g);
    ExpectDataLoss(bad, what);
  }
}

TEST(CheckpointTest, RandomSingleByteCorruptionsNeverLoad) {
  const std::string dir = TestDir();
  const std::string f = SmallCheckpointBytes(dir + "/good.gtc");
  const std::string bad = dir + "/bad.gtc";
  std::mt19937 rng(20240601);
  std::uniform_int_distribution<size_t> pos(0, f.size() - 1);
  std::uniform_int_distribution<int> mask(1, 255);
  std::map<Code, int> codes;
  for (int i = 0; i < 200; ++i) {
    std::string g = f;
    const size_t at = pos(rng);
    g[at] = static_cast<char>(g[at] ^ mask(rng));
    WriteRaw(bad, g);
    std::unique_ptr<ParameterStore> store;
    Status s = ReadCheckpoint(bad, &store, nullptr);
    ASSERT_EQ(s.code(), Code::kDataLoss) << "byte " << at << ": " << s.ToString();
    ASSERT_EQ(store, nullptr);
  }
}

TEST(CheckpointTest, WrongMagicIsDataLoss) {
  const std::string dir = TestDir();
  std::string f = SmallCheckpointBytes(dir + "/good.gtc");
  std::memcpy(&f[0], "PK\x03\x04\0\0\0\0", 8);  // e.g. a torch.save zip
  const std::string bad = dir + "/zip.gtc";
  WriteRaw(bad, f);
  ExpectDataLoss(bad, "magic");
  std::unique_ptr<ParameterStore> store;
  EXPECT_NE(ReadCheckpoint(bad, &store, nullptr).message().find("magic"), std::string::npos);

  WriteRaw(bad, "hello, world: this is a text file, not a checkpoint\n");
  ExpectDataLoss(bad, "text");
}

TEST(CheckpointTest, LengthsBeyondTheFileAreDataLoss) {
  const std::string dir = TestDir();
  const std::string f = SmallCheckpointBytes(dir + "/good.gtc");
  const std::string bad = dir + "/bad.gtc";
  struct Case {
    const char* what;
    size_t at;
    uint64_t value;
    bool is64;
  };
  const Case cases[] = {
      {"header longer than the file", 12, f.size() + 100, false},
      {"header length at the 64 MiB limit", 12, uint32_t{64} << 20, false},
      {"header length 4 GiB - 1", 12, 0xFFFFFFFFu, false},
      {"data length 2^63", 16, uint64_t{1} << 63, true},
      {"data length 2^64 - 1", 16, ~uint64_t{0}, true},
      {"data length 0", 16, 0, true},
  };
  for (const Case& c : cases) {
    std::string g = f;
    if (c.is64) {
      Put64(&g, c.at, c.value);
    } else {
      Put32(&g, c.at, static_cast<uint32_t>(c.value));
    }
    WriteRaw(bad, g);
    ExpectDataLoss(bad, c.what);
  }
}

// Headers that pass the CRC but describe something impossible.
TEST(CheckpointTest, InvalidHeadersAreDataLoss) {
  const std::string dir = TestDir();
  const std::string bad = dir + "/forged.gtc";

  proto::CheckpointHeader base;
  base.set_version(7);
  LayoutToProto(SmallLayout(), base.mutable_layout());  // P = 17
  const size_t p = 17;
  proto::CheckpointBuffer* m = base.add_buffers();
  m->set_name("momentum");
  m->set_dtype(proto::CHECKPOINT_DTYPE_FP32);
  m->set_byte_length(p * 4);
  const std::string data(p * 4 * 2, '\x01');

  // The forgery itself loads: the cases below differ in one thing.
  WriteRaw(bad, ForgeFile(base, data));
  std::unique_ptr<ParameterStore> store;
  Status s = ReadCheckpoint(bad, &store, nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(store->version(), 7u);

  struct Case {
    std::string what;
    std::string expect;  // in the message
    proto::CheckpointHeader header;
    std::string data;
  };
  std::vector<Case> cases;
  {
    Case c{"module buffers of another size", "model_buffer_bytes 5, its buffers hold 8", base,
           data + std::string(5, '\0')};
    proto::TensorSpec* b = c.header.mutable_layout()->add_buffers();
    b->set_name("bn.num_batches_tracked");
    b->set_dtype(proto::TENSOR_DTYPE_INT64);
    c.header.set_model_buffer_bytes(5);
    cases.push_back(c);
  }
  {
    Case c{"module buffer bytes beyond the data", "data length", base, data};
    proto::TensorSpec* b = c.header.mutable_layout()->add_buffers();
    b->set_name("bn.num_batches_tracked");
    b->set_dtype(proto::TENSOR_DTYPE_INT64);
    c.header.set_model_buffer_bytes(8);
    cases.push_back(c);
  }
  {
    Case c{"unknown dtype", "dtype", base, data};
    c.header.mutable_buffers(0)->set_dtype(static_cast<proto::CheckpointDType>(9));
    cases.push_back(c);
  }
  {
    Case c{"unspecified dtype", "dtype", base, data};
    c.header.mutable_buffers(0)->set_dtype(proto::CHECKPOINT_DTYPE_UNSPECIFIED);
    cases.push_back(c);
  }
  {
    Case c{"buffer size is not P * 4", "bytes", base, std::string(p * 4 + p * 2, '\x01')};
    c.header.mutable_buffers(0)->set_byte_length(p * 2);
    cases.push_back(c);
  }
  {
    Case c{"bf16 buffer with fp32 size", "bytes", base, data};
    c.header.mutable_buffers(0)->set_dtype(proto::CHECKPOINT_DTYPE_BF16);
    cases.push_back(c);
  }
  {
    Case c{"duplicate buffer", "duplicate", base, std::string(p * 4 * 3, '\x01')};
    *c.header.add_buffers() = c.header.buffers(0);
    cases.push_back(c);
  }
  {
    Case c{"unnamed buffer", "empty name", base, data};
    c.header.mutable_buffers(0)->clear_name();
    cases.push_back(c);
  }
  {
    Case c{"data shorter than described", "differs", base, std::string(p * 4, '\x01')};
    cases.push_back(c);
  }
  {
    Case c{"data longer than described", "differs", base, data + "abcd"};
    cases.push_back(c);
  }
  {
    Case c{"no parameters", "no parameters", base, ""};
    c.header.clear_layout();
    c.header.clear_buffers();
    cases.push_back(c);
  }
  {
    Case c{"negative dimension", "layout", base, data};
    c.header.mutable_layout()->mutable_tensors(0)->set_shape(0, -4);
    cases.push_back(c);
  }
  {
    Case c{"duplicate tensor", "layout", base, data};
    *c.header.mutable_layout()->add_tensors() = c.header.layout().tensors(0);
    cases.push_back(c);
  }
  {
    Case c{"2^40 parameters", "layout", base, data};
    c.header.mutable_layout()->mutable_tensors(0)->set_shape(0, int64_t{1} << 40);
    cases.push_back(c);
  }
  {
    Case c{"duplicate scalar", "duplicate", base, data};
    proto::CheckpointScalar* sc = c.header.add_scalars();
    sc->set_name("gap/feeds");
    *c.header.add_scalars() = *sc;
    cases.push_back(c);
  }
  for (const Case& c : cases) {
    WriteRaw(bad, ForgeFile(c.header, c.data));
    std::unique_ptr<ParameterStore> loaded;
    Status r = ReadCheckpoint(bad, &loaded, nullptr);
    EXPECT_EQ(r.code(), Code::kDataLoss) << c.what << ": " << r.ToString();
    EXPECT_NE(r.message().find(c.expect), std::string::npos) << c.what << ": " << r.message();
    EXPECT_NE(r.message().find(bad), std::string::npos) << c.what;
    EXPECT_EQ(loaded, nullptr) << c.what;
  }

  // A header that is not a protobuf at all.
  std::string g = ForgeFile(base, data);
  const uint32_t h = Get32(g, 12);
  for (uint32_t i = 0; i < h; ++i) g[24 + i] = '\xff';
  g.replace(g.size() - 12, 4, std::string(4, '\0'));
  Put32(&g, g.size() - 12, Crc(g, g.size() - 12));
  WriteRaw(bad, g);
  ExpectDataLoss(bad, "garbage header");
}

// ---------------------------------------------------------------------------
// CheckpointDirectory

TEST(CheckpointDirectoryTest, FileNames) {
  EXPECT_EQ(CheckpointDirectory::FileName(42), "ckpt-00000000000000000042.gtc");
  uint64_t v = 0;
  for (uint64_t version : {uint64_t{0}, uint64_t{42}, ~uint64_t{0}}) {
    ASSERT_TRUE(CheckpointDirectory::ParseFileName(CheckpointDirectory::FileName(version), &v));
    EXPECT_EQ(v, version);
  }
  for (const char* name :
       {"ckpt-99999999999999999999.gtc", "ckpt-0000000000000000042.gtc",
        "ckpt-000000000000000000042.gtc", "ckpt-0000000000000000004x.gtc",
        "ckpt-00000000000000000042.gtc.tmp", "ckpt-00000000000000000042.gtd",
        "Ckpt-00000000000000000042.gtc", "ckpt-+0000000000000000042.gtc", "", "ckpt-.gtc"}) {
    EXPECT_FALSE(CheckpointDirectory::ParseFileName(name, &v)) << name;
  }
}

TEST(CheckpointDirectoryTest, KeepsTheNewestAndRestoresIt) {
  const std::string dir = TestDir() + "/nested/ckpts";  // Save creates it
  CheckpointDirectory ckpts(dir, 3);
  std::vector<std::unique_ptr<ParameterStore>> saved;
  for (uint64_t i = 1; i <= 5; ++i) {
    saved.push_back(MakeStore(MediumLayout(), static_cast<uint32_t>(i), i * 100));
    std::string written;
    Status s = ckpts.Save(*saved.back(), Meta(), &written);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(written, dir + "/" + CheckpointDirectory::FileName(i * 100));
  }
  const std::vector<std::string> expected = {
      dir + "/ckpt-00000000000000000300.gtc",
      dir + "/ckpt-00000000000000000400.gtc",
      dir + "/ckpt-00000000000000000500.gtc",
  };
  EXPECT_EQ(ckpts.List(), expected);

  std::unique_ptr<ParameterStore> store;
  CheckpointMeta meta;
  std::string restored;
  std::vector<std::string> skipped;
  Status s = ckpts.RestoreNewest(&store, &meta, &restored, &skipped);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(restored, expected[2]);
  EXPECT_TRUE(skipped.empty());
  ExpectIdentical(*saved[4], *store);
  ExpectSameMeta(Meta(), meta);

  // Corrupt the newest: the second newest is restored, the newest reported.
  std::string f = ReadRaw(expected[2]);
  f[f.size() / 2] ^= 0x40;
  WriteRaw(expected[2], f);
  skipped.clear();
  s = ckpts.RestoreNewest(&store, &meta, &restored, &skipped);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(restored, expected[1]);
  ExpectIdentical(*saved[3], *store);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_EQ(skipped[0].rfind(expected[2] + ": ", 0), 0u) << skipped[0];
  EXPECT_NE(skipped[0].find("CRC"), std::string::npos) << skipped[0];

  // A torn one too.
  f = ReadRaw(expected[1]);
  WriteRaw(expected[1], f.substr(0, f.size() / 3));
  skipped.clear();
  ASSERT_TRUE(ckpts.RestoreNewest(&store, nullptr, nullptr, &skipped).ok());
  ExpectIdentical(*saved[2], *store);
  EXPECT_EQ(skipped.size(), 2u);

  // All invalid: DATA_LOSS, nothing returned.
  WriteRaw(expected[0], "");
  std::unique_ptr<ParameterStore> none;
  skipped.clear();
  s = ckpts.RestoreNewest(&none, nullptr, nullptr, &skipped);
  EXPECT_EQ(s.code(), Code::kDataLoss) << s.ToString();
  EXPECT_EQ(none, nullptr);
  EXPECT_EQ(skipped.size(), 3u);
}

TEST(CheckpointDirectoryTest, EmptyOrMissingDirectoryIsNotFound) {
  const std::string dir = TestDir();
  std::unique_ptr<ParameterStore> store;
  Status s = CheckpointDirectory(dir, 3).RestoreNewest(&store, nullptr, nullptr, nullptr);
  EXPECT_EQ(s.code(), Code::kNotFound) << s.ToString();
  s = CheckpointDirectory(dir + "/absent", 3).RestoreNewest(&store, nullptr, nullptr, nullptr);
  EXPECT_EQ(s.code(), Code::kNotFound) << s.ToString();
  EXPECT_TRUE(CheckpointDirectory(dir + "/absent", 3).List().empty());
  EXPECT_EQ(store, nullptr);
}

TEST(CheckpointDirectoryTest, IgnoresTempAndForeignFiles) {
  const std::string dir = TestDir();
  CheckpointDirectory ckpts(dir, 2);
  std::unique_ptr<ParameterStore> s1 = MakeStore(SmallLayout(), 1, 10);
  ASSERT_TRUE(ckpts.Save(*s1, Meta(), nullptr).ok());

  // A crash mid-write left a temp of a newer version; other files belong
  // to someone else.
  const std::string temp = dir + "/" + CheckpointDirectory::FileName(99) + ".tmp";
  const std::string foreign[] = {dir + "/notes.txt", dir + "/ckpt-5.gtc",
                                 dir + "/ckpt-00000000000000000001.gtc.bak", dir + "/x.tmp"};
  WriteRaw(temp, "half a checkpoint");
  for (const std::string& f : foreign) WriteRaw(f, "not mine");

  std::unique_ptr<ParameterStore> store;
  std::string restored;
  std::vector<std::string> skipped;
  ASSERT_TRUE(ckpts.RestoreNewest(&store, nullptr, &restored, &skipped).ok());
  EXPECT_EQ(restored, dir + "/" + CheckpointDirectory::FileName(10));
  EXPECT_TRUE(skipped.empty());
  ExpectIdentical(*s1, *store);
  EXPECT_EQ(ckpts.List().size(), 1u);

  // The next Save removes the temp; pruning touches only checkpoints.
  for (uint64_t v : {20, 30, 40}) {
    ASSERT_TRUE(ckpts.Save(*MakeStore(SmallLayout(), 2, v), Meta(), nullptr).ok());
  }
  EXPECT_FALSE(Exists(temp));
  for (const std::string& f : foreign) EXPECT_TRUE(Exists(f)) << f;
  const std::vector<std::string> expected = {dir + "/" + CheckpointDirectory::FileName(30),
                                             dir + "/" + CheckpointDirectory::FileName(40)};
  EXPECT_EQ(ckpts.List(), expected);
}

TEST(CheckpointDirectoryTest, FileWhoseVersionDiffersFromItsNameIsSkipped) {
  const std::string dir = TestDir();
  CheckpointDirectory ckpts(dir, 5);
  std::unique_ptr<ParameterStore> s5 = MakeStore(SmallLayout(), 1, 5);
  ASSERT_TRUE(ckpts.Save(*s5, Meta(), nullptr).ok());
  WriteRaw(dir + "/" + CheckpointDirectory::FileName(9),
           ReadRaw(dir + "/" + CheckpointDirectory::FileName(5)));
  std::unique_ptr<ParameterStore> store;
  std::vector<std::string> skipped;
  ASSERT_TRUE(ckpts.RestoreNewest(&store, nullptr, nullptr, &skipped).ok());
  EXPECT_EQ(store->version(), 5u);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("name says 9"), std::string::npos) << skipped[0];
}

TEST(CheckpointDirectoryTest, SaveNeverRemovesTheFileItWrote) {
  const std::string dir = TestDir();
  CheckpointDirectory ckpts(dir, 2);
  for (uint64_t v : {100, 200}) {
    ASSERT_TRUE(ckpts.Save(*MakeStore(SmallLayout(), 1, v), Meta(), nullptr).ok());
  }
  std::string written;
  ASSERT_TRUE(ckpts.Save(*MakeStore(SmallLayout(), 1, 50), Meta(), &written).ok());
  EXPECT_TRUE(Exists(written));
  EXPECT_EQ(ckpts.List().size(), 2u);
  EXPECT_TRUE(Exists(dir + "/" + CheckpointDirectory::FileName(200)));

  // keep 0 is taken as 1.
  CheckpointDirectory one(dir, 0);
  EXPECT_EQ(one.keep(), 1u);
  ASSERT_TRUE(one.Save(*MakeStore(SmallLayout(), 1, 300), Meta(), nullptr).ok());
  EXPECT_EQ(one.List(), std::vector<std::string>{dir + "/" + CheckpointDirectory::FileName(300)});
}

// ---------------------------------------------------------------------------
// An UpdateEngine resumed from a checkpoint, through the public API only.

class EngineDriver {
 public:
  EngineDriver(UpdateEngine* engine, uint32_t seed) : engine_(engine), rng_(seed) {}

  // Random pulls and pushes from kWorkers until `pushes` were applied; a
  // worker pushes a gradient for its last pull, so staleness varies.
  void Run(int pushes) {
    std::uniform_int_distribution<size_t> pick(0, kWorkers.size() - 1);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> pulled(engine_->store().size());
    std::vector<float> gradient(engine_->store().size());
    int applied = 0;
    while (applied < pushes) {
      const WorkerId w = kWorkers[pick(rng_)];
      auto it = base_.find(w);
      if (it == base_.end()) {
        uint64_t version;
        ASSERT_TRUE(engine_->Pull(w, pulled.data(), pulled.size(), &version).ok());
        base_[w] = version;
        continue;
      }
      for (float& g : gradient) g = normal(rng_);
      PushRequest push;
      push.worker = w;
      push.base_version = it->second;
      push.gradient = GradientView(gradient.data(), gradient.size());
      ApplyStats stats;
      Status s = engine_->Push(push, &stats);
      ASSERT_TRUE(s.ok()) << s.ToString();
      ASSERT_EQ(stats.outcome, ApplyStats::Outcome::kApplied);
      base_.erase(it);
      ++applied;
    }
  }

  // What a restarted master's workers do: pull afresh (the engine keeps
  // which version each worker pulled outside the store).
  void PullAll() {
    std::vector<float> pulled(engine_->store().size());
    for (WorkerId w : kWorkers) {
      uint64_t version;
      ASSERT_TRUE(engine_->Pull(w, pulled.data(), pulled.size(), &version).ok());
      base_[w] = version;
    }
  }

  static const std::vector<WorkerId> kWorkers;

 private:
  UpdateEngine* engine_;
  std::mt19937 rng_;
  std::map<WorkerId, uint64_t> base_;  // outstanding pulls
};

const std::vector<WorkerId> EngineDriver::kWorkers = {1, 3, 8};

UpdateEngine::Options GapAwareOptions(GapPrecision precision) {
  UpdateEngine::Options options;
  options.rule.kind = RuleKind::kGapAware;
  options.rule.momentum = 0.9f;
  options.rule.gap_source = GapSource::kSnapshot;
  options.rule.gap_precision = precision;
  options.schedule.learning_rate = 0.05;
  options.schedule.warmup_updates = 10;
  options.schedule.warmup_start_factor = 0.1;
  options.schedule.decay_at_fractions = {0.6};
  options.schedule.total_updates = 100;
  return options;
}

// Rebuilds an engine from a restored store without UpdateEngine::Restore:
// Create, Join the checkpoint's workers (which makes zeroed per-worker
// state), then overwrite parameters, every buffer, the scalars and the
// version. Tests the file end to end independently of Restore.
void RestoreEngine(const ParameterStore& restored, const CheckpointMeta& meta,
                   const UpdateEngine::Options& options, std::unique_ptr<UpdateEngine>* out) {
  ParameterLayout layout = restored.layout();
  std::unique_ptr<UpdateEngine> engine;
  Status s = UpdateEngine::Create(std::move(layout), options, &engine);
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (WorkerId w : meta.workers) ASSERT_TRUE(engine->Join(w).ok());
  ParameterStore* store = engine->mutable_store();
  ASSERT_EQ(store->buffers().size(), restored.buffers().size());
  std::memcpy(store->params(), restored.params(), restored.size() * sizeof(float));
  for (const auto& [name, buffer] : restored.buffers()) {
    FlatBuffer* target = store->buffer(name);
    ASSERT_NE(target, nullptr) << name;
    ASSERT_EQ(target->dtype(), buffer.dtype()) << name;
    std::memcpy(target->data(), buffer.data(), buffer.bytes());
  }
  for (const auto& [name, value] : restored.scalars()) store->set_scalar(name, value);
  store->set_version(restored.version());
  *out = std::move(engine);
}

class CheckpointEngineTest : public ::testing::TestWithParam<GapPrecision> {};

TEST_P(CheckpointEngineTest, ResumedTrainingIsBitIdentical) {
  const std::string dir = TestDir();
  const UpdateEngine::Options options = GapAwareOptions(GetParam());
  ParameterLayout layout = MediumLayout();
  std::unique_ptr<UpdateEngine> original;
  ASSERT_TRUE(UpdateEngine::Create(layout, options, &original).ok());
  std::mt19937 init(11);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  for (size_t i = 0; i < original->store().size(); ++i) {
    original->mutable_store()->params()[i] = normal(init);
  }
  for (WorkerId w : EngineDriver::kWorkers) ASSERT_TRUE(original->Join(w).ok());

  EngineDriver before(original.get(), 77);
  before.Run(50);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  ASSERT_EQ(original->version(), 50u);

  CheckpointDirectory ckpts(dir, 2);
  CheckpointMeta meta;
  meta.job_name = "resume";
  meta.rule = RuleKindName(options.rule.kind);
  meta.workers = original->members();
  std::string path;
  ASSERT_TRUE(ckpts.Save(original->store(), meta, &path).ok());

  // "Kill": everything below comes from the file.
  std::unique_ptr<ParameterStore> restored_store;
  CheckpointMeta restored_meta;
  Status s = ckpts.RestoreNewest(&restored_store, &restored_meta, nullptr, nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectIdentical(original->store(), *restored_store);
  EXPECT_EQ(restored_meta.rule, "gap-aware");
  std::unique_ptr<UpdateEngine> resumed;
  RestoreEngine(*restored_store, restored_meta, options, &resumed);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  ExpectIdentical(original->store(), resumed->store());
  EXPECT_EQ(resumed->learning_rate(), original->learning_rate());

  // The same through UpdateEngine::Restore, from a second read of the file.
  std::unique_ptr<ParameterStore> second_store;
  ASSERT_TRUE(ReadCheckpoint(path, &second_store, nullptr).ok());
  std::unique_ptr<UpdateEngine> restored;
  s = UpdateEngine::Restore(std::move(second_store), restored_meta.workers, options, &restored);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectIdentical(original->store(), restored->store());
  EXPECT_EQ(restored->members(), original->members());

  // All continue with the same pulls and pushes.
  EngineDriver after_original(original.get(), 78);
  EngineDriver after_resumed(resumed.get(), 78);
  EngineDriver after_restored(restored.get(), 78);
  after_original.PullAll();
  after_resumed.PullAll();
  after_restored.PullAll();
  after_original.Run(50);
  after_resumed.Run(50);
  after_restored.Run(50);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  EXPECT_EQ(resumed->version(), 100u);
  ExpectIdentical(original->store(), resumed->store());
  ExpectIdentical(original->store(), restored->store());
  EXPECT_EQ(resumed->store().scalar("gap/feeds"), original->store().scalar("gap/feeds"));
  EXPECT_GT(resumed->store().scalar("gap/feeds"), 50.0);

  // The check can fail: a resume that lost the momentum diverges.
  std::unique_ptr<UpdateEngine> amnesiac;
  RestoreEngine(*restored_store, restored_meta, options, &amnesiac);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  amnesiac->mutable_store()->buffer("momentum")->Fill(0.0f);
  EngineDriver after_amnesiac(amnesiac.get(), 78);
  after_amnesiac.PullAll();
  after_amnesiac.Run(50);
  EXPECT_NE(std::memcmp(amnesiac->store().params(), original->store().params(),
                        original->store().size() * sizeof(float)),
            0);
}

INSTANTIATE_TEST_SUITE_P(Precisions, CheckpointEngineTest,
                         ::testing::Values(GapPrecision::kFloat32, GapPrecision::kBfloat16),
                         [](const ::testing::TestParamInfo<GapPrecision>& info) {
                           return info.param == GapPrecision::kFloat32 ? "fp32" : "bf16";
                         });

// ---------------------------------------------------------------------------
// Size

TEST(CheckpointTest, LargeStoreRoundTrip) {
  const std::string dir = TestDir();
  ParameterLayout layout;
  ASSERT_TRUE(layout.Add("embedding.weight", {5000, 4000}).ok());
  ASSERT_TRUE(layout.Add("head.weight", {5000, 1000}).ok());
  ParameterStore store(std::move(layout));  // P = 25M: 100 MB
  ASSERT_EQ(store.size(), 25000000u);
  FlatBuffer* momentum = store.AddBuffer("momentum", DType::kFloat32);  // +100 MB
  uint32_t x = 12345;
  float* theta = store.params();
  float* v = momentum->f32();
  for (size_t i = 0; i < store.size(); ++i) {
    x = x * 1664525u + 1013904223u;
    theta[i] = static_cast<float>(static_cast<int32_t>(x)) * 1e-9f;
    v[i] = static_cast<float>(x >> 8) * 1e-7f;
  }
  store.set_version(123456789);

  CheckpointDirectory ckpts(dir, 2);
  using Clock = std::chrono::steady_clock;
  const double mb = store.MemoryBytes() / 1e6;
  auto t0 = Clock::now();
  std::string path;
  ASSERT_TRUE(ckpts.Save(store, Meta(), &path).ok());
  auto t1 = Clock::now();
  std::unique_ptr<ParameterStore> loaded;
  Status s = ReadCheckpoint(path, &loaded, nullptr);
  auto t2 = Clock::now();
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectIdentical(store, *loaded);

  const double write_s = std::chrono::duration<double>(t1 - t0).count();
  const double read_s = std::chrono::duration<double>(t2 - t1).count();
  std::printf(
      "checkpoint of %.0f MB: write+fsync %.2f s (%.0f MB/s), read+verify %.2f s "
      "(%.0f MB/s)\n",
      mb, write_s, mb / write_s, read_s, mb / read_s);
  RecordProperty("write_MBps", static_cast<int>(mb / write_s));
  RecordProperty("read_MBps", static_cast<int>(mb / read_s));
}

}  // namespace
}  // namespace gaptrain
