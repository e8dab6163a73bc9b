#include "image/byte_source.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>

#include "services/testing/test_files.h"

namespace gaptrain {
namespace {

// Deterministic bytes that compress somewhat (a small alphabet).
std::string SampleBytes(size_t size, uint32_t seed) {
  std::mt19937 random(seed);
  std::string bytes(size, '\0');
  for (char& c : bytes) c = static_cast<char>('a' + random() % 7);
  return bytes;
}

// Everything `source` yields, read `chunk` bytes at a time.
Status ReadAll(ByteSource* source, size_t chunk, std::string* out) {
  out->clear();
  std::string buffer(chunk, '\0');
  for (;;) {
    size_t got = 0;
    GAPTRAIN_RETURN_IF_ERROR(source->Read(buffer.data(), buffer.size(), &got));
    if (got == 0) return Status::OK();
    out->append(buffer.data(), got);
  }
}

TEST(FileSourceTest, ReadsTheWholeFile) {
  const std::string path = TestDir("byte_source") + "/data";
  const std::string bytes = SampleBytes(3 << 20, 1);
  WriteRaw(path, bytes);
  std::unique_ptr<FileSource> source;
  ASSERT_TRUE(FileSource::Open(path, &source).ok());
  std::string read;
  ASSERT_TRUE(ReadAll(source.get(), 100000, &read).ok());
  EXPECT_EQ(read, bytes);
  EXPECT_EQ(source->name(), path);
}

TEST(FileSourceTest, ReadsARange) {
  const std::string path = TestDir("byte_source") + "/data";
  const std::string bytes = SampleBytes(5000, 2);
  WriteRaw(path, bytes);
  std::unique_ptr<FileSource> source;
  ASSERT_TRUE(FileSource::OpenRange(path, 100, 1000, &source).ok());
  std::string read;
  ASSERT_TRUE(ReadAll(source.get(), 333, &read).ok());
  EXPECT_EQ(read, bytes.substr(100, 1000));
  EXPECT_EQ(source->name(), path + "[100, +1000)");
}

TEST(FileSourceTest, RejectsARangeBeyondTheEnd) {
  const std::string path = TestDir("byte_source") + "/data";
  WriteRaw(path, SampleBytes(100, 3));
  std::unique_ptr<FileSource> source;
  const Status s = FileSource::OpenRange(path, 50, 51, &source);
  EXPECT_EQ(s.code(), Status::Code::kOutOfRange);
  EXPECT_NE(s.message().find(path), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("100 bytes"), std::string::npos) << s.ToString();
}

TEST(FileSourceTest, AMissingFileIsNotFound) {
  std::unique_ptr<FileSource> source;
  const std::string path = TestDir("byte_source") + "/absent";
  const Status s = FileSource::Open(path, &source);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_NE(s.message().find(path), std::string::npos) << s.ToString();
}

TEST(GzipSourceTest, InflatesWhatGzipWrote) {
  const std::string path = TestDir("byte_source") + "/data.gz";
  const std::string bytes = SampleBytes(4 << 20, 4);
  WriteGzip(path, bytes);
  std::unique_ptr<FileSource> file;
  ASSERT_TRUE(FileSource::Open(path, &file).ok());
  std::unique_ptr<GzipSource> gzip;
  ASSERT_TRUE(GzipSource::Open(file.get(), &gzip).ok());
  std::string read;
  ASSERT_TRUE(ReadAll(gzip.get(), 70000, &read).ok());
  EXPECT_EQ(read, bytes);
  EXPECT_EQ(gzip->name(), "gzip of " + path);
}

TEST(GzipSourceTest, ReadsConcatenatedMembers) {
  const std::string dir = TestDir("byte_source");
  const std::string first = SampleBytes(10000, 5);
  const std::string second = SampleBytes(20000, 6);
  WriteGzip(dir + "/a.gz", first);
  WriteGzip(dir + "/b.gz", second);
  WriteRaw(dir + "/ab.gz", ReadRaw(dir + "/a.gz") + ReadRaw(dir + "/b.gz"));
  std::unique_ptr<FileSource> file;
  ASSERT_TRUE(FileSource::Open(dir + "/ab.gz", &file).ok());
  std::unique_ptr<GzipSource> gzip;
  ASSERT_TRUE(GzipSource::Open(file.get(), &gzip).ok());
  std::string read;
  ASSERT_TRUE(ReadAll(gzip.get(), 4096, &read).ok());
  EXPECT_EQ(read, first + second);
}

TEST(GzipSourceTest, ATruncatedStreamIsDataLoss) {
  const std::string dir = TestDir("byte_source");
  WriteGzip(dir + "/full.gz", SampleBytes(100000, 7));
  const std::string full = ReadRaw(dir + "/full.gz");
  WriteRaw(dir + "/cut.gz", full.substr(0, full.size() / 2));
  std::unique_ptr<FileSource> file;
  ASSERT_TRUE(FileSource::Open(dir + "/cut.gz", &file).ok());
  std::unique_ptr<GzipSource> gzip;
  ASSERT_TRUE(GzipSource::Open(file.get(), &gzip).ok());
  std::string read;
  const Status s = ReadAll(gzip.get(), 4096, &read);
  EXPECT_EQ(s.code(), Status::Code::kDataLoss);
  EXPECT_NE(s.message().find("truncated gzip stream"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find(dir + "/cut.gz"), std::string::npos) << s.ToString();
}

TEST(GzipSourceTest, ACorruptStreamIsDataLoss) {
  const std::string dir = TestDir("byte_source");
  WriteGzip(dir + "/good.gz", SampleBytes(100000, 8));
  std::string bytes = ReadRaw(dir + "/good.gz");
  bytes[bytes.size() - 6] ^= 0x55;  // inside the CRC-32 of the trailer
  WriteRaw(dir + "/bad.gz", bytes);
  std::unique_ptr<FileSource> file;
  ASSERT_TRUE(FileSource::Open(dir + "/bad.gz", &file).ok());
  std::unique_ptr<GzipSource> gzip;
  ASSERT_TRUE(GzipSource::Open(file.get(), &gzip).ok());
  std::string read;
  const Status s = ReadAll(gzip.get(), 4096, &read);
  EXPECT_EQ(s.code(), Status::Code::kDataLoss);
  EXPECT_NE(s.message().find("corrupt gzip stream (incorrect data check)"), std::string::npos)
      << s.ToString();
}

TEST(GzipSourceTest, PlainBytesAreNotGzip) {
  const std::string path = TestDir("byte_source") + "/plain";
  WriteRaw(path, "not compressed at all");
  std::unique_ptr<FileSource> file;
  ASSERT_TRUE(FileSource::Open(path, &file).ok());
  std::unique_ptr<GzipSource> gzip;
  ASSERT_TRUE(GzipSource::Open(file.get(), &gzip).ok());
  std::string read;
  const Status s = ReadAll(gzip.get(), 4096, &read);
  EXPECT_EQ(s.code(), Status::Code::kDataLoss);
  EXPECT_NE(s.message().find("incorrect header check"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace gaptrain
