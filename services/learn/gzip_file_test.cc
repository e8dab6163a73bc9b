#include "services/learn/gzip_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "services/testing/test_files.h"

namespace gaptrain {
namespace {


// Compressible but not trivial: words from a small vocabulary chosen by an
// LCG, so deflate emits dynamic Huffman blocks with back-references.
std::string SampleText(size_t bytes) {
  static const char* kWords[] = {"gap ", "aware ", "stale ", "gradient ", "worker ",
                                 "master ", "epoch ", "batch ", "\n", "0123 "};
  std::string s;
  uint32_t x = 12345;
  while (s.size() < bytes) {
    x = x * 1664525u + 1013904223u;
    s += kWords[(x >> 16) % 10];
  }
  s.resize(bytes);
  return s;
}

// How many bytes zlib's inflate can produce from a (truncated) gzip file,
// decoded here in one pass without the gz* functions.
size_t InflatablePrefix(const std::string& gz) {
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return 0;
  std::string out(gz.size() * 64 + 1024, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  z.avail_in = static_cast<uInt>(gz.size());
  z.next_out = reinterpret_cast<Bytef*>(&out[0]);
  z.avail_out = static_cast<uInt>(out.size());
  inflate(&z, Z_FINISH);
  size_t produced = z.total_out;
  inflateEnd(&z);
  return produced;
}

TEST(GzipFileTest, ReadsPlainFileUnchanged) {
  const std::string path = TestDir("gzip_file_test") + "/plain.bin";
  std::string bytes = SampleText(100000);
  bytes[5] = '\0';  // binary-safe
  WriteRaw(path, bytes);
  std::string got;
  Status s = ReadFileMaybeGzip(path, &got);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(got, bytes);
}

// A dataset lands in a buffer of its own size: reading must not grow it
// (a copy and twice the pages) just to find the end of the file.
TEST(GzipFileTest, PlainAndGzipFilesFillABufferOfTheirOwnSize) {
  const std::string dir = TestDir("gzip_file_test");
  const std::string bytes = SampleText(3 << 20);
  WriteRaw(dir + "/sized.bin", bytes);
  WriteGzip(dir + "/sized.bin.gz", bytes);
  for (const std::string name : {"sized.bin", "sized.bin.gz"}) {
    std::vector<uint8_t> got;
    ASSERT_TRUE(ReadFileMaybeGzip(dir + "/" + name, &got).ok()) << name;
    EXPECT_EQ(got.size(), bytes.size()) << name;
    EXPECT_LE(got.capacity(), bytes.size() + 4096) << name;
  }
}

TEST(GzipFileTest, ReadsEmptyPlainFile) {
  const std::string path = TestDir("gzip_file_test") + "/empty";
  WriteRaw(path, "");
  std::string got = "stale";
  ASSERT_TRUE(ReadFileMaybeGzip(path, &got).ok());
  EXPECT_EQ(got, "");
}

TEST(GzipFileTest, DecompressesGzipLargerThanTheFile) {
  const std::string path = TestDir("gzip_file_test") + "/text.gz";
  const std::string bytes = SampleText(3 << 20);
  WriteGzip(path, bytes);
  ASSERT_LT(ReadRaw(path).size(), bytes.size() / 2);  // really compressed
  std::string got;
  Status s = ReadFileMaybeGzip(path, &got);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(got.size(), bytes.size());
  EXPECT_TRUE(got == bytes);
}

TEST(GzipFileTest, ReadsIntoAByteVectorToo) {
  const std::string path = TestDir("gzip_file_test") + "/vector.gz";
  const std::string bytes = SampleText(1 << 20);
  WriteGzip(path, bytes);
  std::vector<uint8_t> got = {1, 2, 3};
  ASSERT_TRUE(ReadFileMaybeGzip(path, &got).ok());
  EXPECT_TRUE(std::string(got.begin(), got.end()) == bytes);
}

TEST(GzipFileTest, ReadsOnlyTheHeadOfAFile) {
  const std::string dir = TestDir("gzip_file_test");
  const std::string bytes = SampleText(3 << 20);
  WriteGzip(dir + "/head.gz", bytes);
  WriteRaw(dir + "/head", bytes);
  for (const std::string name : {"head.gz", "head"}) {
    std::string got;
    ASSERT_TRUE(ReadFileHeadMaybeGzip(dir + "/" + name, 16, &got).ok()) << name;
    EXPECT_EQ(got, bytes.substr(0, 16)) << name;
    // A file shorter than the head asked for comes back whole.
    ASSERT_TRUE(ReadFileHeadMaybeGzip(dir + "/" + name, bytes.size() + 100, &got).ok());
    EXPECT_EQ(got.size(), bytes.size()) << name;
  }
  std::string got;
  EXPECT_EQ(ReadFileHeadMaybeGzip(dir + "/missing.gz", 16, &got).code(),
            Status::Code::kNotFound);
}

TEST(GzipFileTest, ReadsConcatenatedMembers) {
  const std::string dir = TestDir("gzip_file_test");
  WriteGzip(dir + "/a.gz", "first member, ");
  WriteGzip(dir + "/b.gz", "second member");
  WriteRaw(dir + "/ab.gz", ReadRaw(dir + "/a.gz") + ReadRaw(dir + "/b.gz"));
  std::string got;
  ASSERT_TRUE(ReadFileMaybeGzip(dir + "/ab.gz", &got).ok());
  EXPECT_EQ(got, "first member, second member");
}

TEST(GzipFileTest, MissingFileIsNotFoundAndNamesThePath) {
  const std::string path = TestDir("gzip_file_test") + "/no-such-file.gz";
  std::string got;
  Status s = ReadFileMaybeGzip(path, &got);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("not found"), std::string::npos) << s.message();
}

TEST(GzipFileTest, DirectoryIsRejected) {
  const std::string dir = TestDir("gzip_file_test");
  std::string got;
  Status s = ReadFileMaybeGzip(dir, &got);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(dir), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("directory"), std::string::npos) << s.message();
}

TEST(GzipFileTest, CorruptStreamNamesPathAndOffsets) {
  const std::string dir = TestDir("gzip_file_test");
  const std::string good = dir + "/good.gz";
  WriteGzip(good, SampleText(1 << 20));
  std::string bytes = ReadRaw(good);
  ASSERT_GT(bytes.size(), 1000u);
  const size_t middle = bytes.size() / 2;
  for (size_t i = middle; i < middle + 16; ++i) bytes[i] = static_cast<char>(bytes[i] ^ 0xA5);
  const std::string bad = dir + "/corrupt.gz";
  WriteRaw(bad, bytes);

  std::string got = "stale";
  Status s = ReadFileMaybeGzip(bad, &got);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kDataLoss) << s.ToString();
  EXPECT_NE(s.message().find(bad), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("corrupt gzip stream"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("compressed offset"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("uncompressed offset at least"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("<fd:"), std::string::npos) << s.message();
  EXPECT_TRUE(got.empty());
  // zlib notices the damage at or after the first flipped byte.
  const std::string key = "at compressed offset ";
  const size_t at = s.message().find(key);
  ASSERT_NE(at, std::string::npos) << s.message();
  const unsigned long long offset = std::stoull(s.message().substr(at + key.size()));
  EXPECT_GE(offset, middle) << s.message();
  EXPECT_LE(offset, bytes.size()) << s.message();
}

TEST(GzipFileTest, CorruptChecksumIsDetected) {
  const std::string dir = TestDir("gzip_file_test");
  WriteGzip(dir + "/good.gz", SampleText(50000));
  std::string bytes = ReadRaw(dir + "/good.gz");
  bytes[bytes.size() - 6] ^= 0x01;  // inside the CRC-32 of the trailer
  WriteRaw(dir + "/badcrc.gz", bytes);
  std::string got;
  Status s = ReadFileMaybeGzip(dir + "/badcrc.gz", &got);
  EXPECT_EQ(s.code(), Status::Code::kDataLoss) << s.ToString();
  EXPECT_NE(s.message().find("badcrc.gz"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("incorrect data check"), std::string::npos) << s.message();
}

TEST(GzipFileTest, TruncatedStreamIsDetected) {
  const std::string dir = TestDir("gzip_file_test");
  WriteGzip(dir + "/good.gz", SampleText(1 << 20));
  std::string bytes = ReadRaw(dir + "/good.gz");
  bytes.resize(bytes.size() / 2);
  WriteRaw(dir + "/cut.gz", bytes);
  std::string got;
  Status s = ReadFileMaybeGzip(dir + "/cut.gz", &got);
  EXPECT_EQ(s.code(), Status::Code::kDataLoss) << s.ToString();
  EXPECT_NE(s.message().find("cut.gz"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("truncated gzip stream"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("compressed offset " + std::to_string(bytes.size())),
            std::string::npos)
      << s.message();
  // Everything before the cut was delivered, so this offset is exact.
  const std::string key = "uncompressed offset ";
  const size_t at = s.message().find(key);
  ASSERT_NE(at, std::string::npos) << s.message();
  const size_t offset = std::stoull(s.message().substr(at + key.size()));
  EXPECT_EQ(offset, InflatablePrefix(bytes)) << s.message();
  EXPECT_TRUE(got.empty());
}

}  // namespace
}  // namespace gaptrain
