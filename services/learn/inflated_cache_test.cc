#include "services/learn/inflated_cache.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <string>
#include <thread>
#include <vector>

#include "services/testing/test_files.h"

namespace gaptrain {
namespace {

using Kind = InflatedCacheOutcome::Kind;

std::string Bytes(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  uint32_t x = seed;
  for (char& c : s) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>((x >> 24) & 0x0f);  // compressible
  }
  return s;
}

std::string AsString(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }
// (Compared with ==: a failing EXPECT_EQ would print a diff of 300 KB.)

class InflatedCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TestDir("inflated_cache_test");
    source_ = dir_ + "/images.gz";
    cache_ = dir_ + "/cache";
    bytes_ = Bytes(300000, 7);
    WriteGzip(source_, bytes_);
  }

  InflatedCacheOutcome Read(std::vector<uint8_t>* got) {
    InflatedCacheOutcome outcome;
    Status s = ReadFileInflatedCached(source_, cache_, got, &outcome);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return outcome;
  }

  std::string dir_, source_, cache_, bytes_;
};

TEST_F(InflatedCacheTest, TheFirstReadFillsTheCacheAndTheNextIsServedFromIt) {
  std::vector<uint8_t> got;
  InflatedCacheOutcome first = Read(&got);
  EXPECT_EQ(first.kind, Kind::kFilled) << first.reason;
  EXPECT_TRUE(AsString(got) == bytes_);
  const uLong crc = crc32_z(0, reinterpret_cast<const Bytef*>(bytes_.data()), bytes_.size());
  char hex[9];
  std::snprintf(hex, sizeof(hex), "%08lx", crc);
  EXPECT_EQ(first.copy_path, cache_ + "/images." + hex + "-300000");
  EXPECT_TRUE(ReadRaw(first.copy_path) == bytes_);

  // The source's compressed body goes bad but its trailer stays: a read
  // that still returns the right bytes cannot have inflated it.
  std::string gz = ReadRaw(source_);
  for (size_t i = 20; i < gz.size() - 8; ++i) gz[i] = static_cast<char>(gz[i] ^ 0x5a);
  WriteRaw(source_, gz);
  InflatedCacheOutcome second = Read(&got);
  EXPECT_EQ(second.kind, Kind::kHit);
  EXPECT_EQ(second.copy_path, first.copy_path);
  EXPECT_TRUE(AsString(got) == bytes_);
  EXPECT_TRUE(FilesEndingIn(cache_, ".tmp").empty());
}

TEST_F(InflatedCacheTest, ACorruptedOrShortCopyIsNeverServedAndIsReplaced) {
  std::vector<uint8_t> got;
  const std::string copy = Read(&got).copy_path;
  for (const std::string& bad : {std::string(bytes_).replace(1000, 1, "\x7f"),
                                 bytes_.substr(0, bytes_.size() - 1), bytes_ + "x",
                                 std::string(bytes_.size(), '\0')}) {
    WriteRaw(copy, bad);
    InflatedCacheOutcome outcome = Read(&got);
    EXPECT_EQ(outcome.kind, Kind::kFilled) << outcome.reason;
    EXPECT_TRUE(AsString(got) == bytes_);
    EXPECT_TRUE(ReadRaw(copy) == bytes_);
  }
}

TEST_F(InflatedCacheTest, AChangedSourceGetsACopyOfItsOwn) {
  std::vector<uint8_t> got;
  const std::string old_copy = Read(&got).copy_path;
  const std::string changed = Bytes(300000, 8);
  WriteGzip(source_, changed);
  InflatedCacheOutcome outcome = Read(&got);
  EXPECT_EQ(outcome.kind, Kind::kFilled);
  EXPECT_NE(outcome.copy_path, old_copy);
  EXPECT_TRUE(AsString(got) == changed);
}

TEST_F(InflatedCacheTest, PlainFilesAndMultiMemberGzipAreReadFromTheSource) {
  std::vector<uint8_t> got;
  WriteRaw(dir_ + "/plain", bytes_);
  InflatedCacheOutcome outcome;
  ASSERT_TRUE(ReadFileInflatedCached(dir_ + "/plain", cache_, &got, &outcome).ok());
  EXPECT_EQ(outcome.kind, Kind::kBypassed);
  EXPECT_EQ(outcome.reason, "not a gzip file");
  EXPECT_TRUE(AsString(got) == bytes_);

  // Two members: the trailer's CRC is the second member's alone.
  WriteGzip(dir_ + "/a.gz", bytes_.substr(0, 1000));
  WriteGzip(dir_ + "/b.gz", bytes_.substr(1000));
  WriteRaw(dir_ + "/two.gz", ReadRaw(dir_ + "/a.gz") + ReadRaw(dir_ + "/b.gz"));
  ASSERT_TRUE(ReadFileInflatedCached(dir_ + "/two.gz", cache_, &got, &outcome).ok());
  EXPECT_EQ(outcome.kind, Kind::kBypassed);
  EXPECT_NE(outcome.reason.find("multi-member"), std::string::npos) << outcome.reason;
  EXPECT_TRUE(AsString(got) == bytes_);
  EXPECT_TRUE(FilesEndingIn(cache_, "-299000").empty());  // no copy of two.gz
}

TEST_F(InflatedCacheTest, AnUnusableCacheDirectoryCostsOnlySpeed) {
  WriteRaw(dir_ + "/not-a-dir", "x");
  std::vector<uint8_t> got;
  InflatedCacheOutcome outcome;
  Status s = ReadFileInflatedCached(source_, dir_ + "/not-a-dir/cache", &got, &outcome);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(outcome.kind, Kind::kBypassed);
  EXPECT_NE(outcome.reason.find("not-a-dir"), std::string::npos) << outcome.reason;
  EXPECT_TRUE(AsString(got) == bytes_);
}

TEST_F(InflatedCacheTest, SourceErrorsAreTheReadersOwn) {
  std::vector<uint8_t> got;
  InflatedCacheOutcome outcome;
  Status s = ReadFileInflatedCached(dir_ + "/missing.gz", cache_, &got, &outcome);
  EXPECT_EQ(s.code(), Status::Code::kNotFound) << s.ToString();
  EXPECT_NE(s.message().find("missing.gz"), std::string::npos);

  // A body that fails to inflate, behind a well-formed trailer.
  std::string gz = ReadRaw(source_);
  gz.replace(gz.size() / 2, 8, "garbage!");
  WriteRaw(source_, gz);
  s = ReadFileInflatedCached(source_, cache_, &got, &outcome);
  EXPECT_EQ(s.code(), Status::Code::kDataLoss) << s.ToString();
  EXPECT_TRUE(FilesEndingIn(cache_, "-300000").empty());
}

TEST_F(InflatedCacheTest, ConcurrentReadersInflateOnceAndAllGetTheBytes) {
  constexpr int kReaders = 4;
  std::vector<std::vector<uint8_t>> got(kReaders);
  std::vector<InflatedCacheOutcome> outcomes(kReaders);
  std::vector<std::thread> readers;
  for (int i = 0; i < kReaders; ++i) {
    readers.emplace_back([&, i] {
      EXPECT_TRUE(ReadFileInflatedCached(source_, cache_, &got[i], &outcomes[i]).ok());
    });
  }
  for (std::thread& t : readers) t.join();
  int filled = 0;
  for (int i = 0; i < kReaders; ++i) {
    EXPECT_TRUE(AsString(got[i]) == bytes_) << i;
    EXPECT_NE(outcomes[i].kind, Kind::kBypassed) << outcomes[i].reason;
    if (outcomes[i].kind == Kind::kFilled) ++filled;
  }
  EXPECT_EQ(filled, 1);
  EXPECT_EQ(FilesEndingIn(cache_, "-300000").size(), 1u);
  EXPECT_TRUE(FilesEndingIn(cache_, ".tmp").empty());
}

}  // namespace
}  // namespace gaptrain
