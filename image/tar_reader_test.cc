#include "image/tar_reader.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "image/byte_source.h"
#include "services/testing/test_files.h"

namespace gaptrain {
namespace {

// A directory tree with every kind of entry the image's layers hold, and
// names beyond ustar's 100 bytes.
struct Tree {
  std::string root;
  std::string long_dir = std::string(90, 'd');  // with the file: past 100 bytes
  std::string long_file = std::string(90, 'f');
  std::string data = std::string(1500, 'x') + "end";
};

Tree MakeTree(const std::string& dir) {
  Tree t;
  t.root = dir + "/tree";
  const std::string cmd = "rm -rf '" + t.root + "' && mkdir -p '" + t.root + "/sub/" +
                          t.long_dir + "' && cd '" + t.root + "' && ln -s data link && " +
                          ": > empty";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  WriteRaw(t.root + "/data", t.data);
  WriteRaw(t.root + "/sub/" + t.long_dir + "/" + t.long_file, "deep");
  EXPECT_EQ(std::system(("ln '" + t.root + "/data' '" + t.root + "/hard'").c_str()), 0);
  return t;
}

// GNU tar's archive of the tree in `format`, owned by uid and gid `id`.
std::string Archive(const Tree& t, const std::string& format, const std::string& id) {
  const std::string path = t.root + "." + format + ".tar";
  const std::string cmd = "tar --create --file '" + path + "' --format=" + format +
                          " --sort=name --owner=u:" + id + " --group=g:" + id + " -C '" +
                          t.root + "' .";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return path;
}

struct Listing {
  std::map<std::string, TarEntry> entries;
  std::map<std::string, std::string> data;
};

Status List(const std::string& path, Listing* listing) {
  return ForEachTarEntry(path, [listing](const TarEntry& entry, TarReader* tar) {
    // Read only some files' data: Next() must skip the rest.
    if (entry.name == "./data" || entry.name.size() > 100) {
      std::string& d = listing->data[entry.name];
      GAPTRAIN_RETURN_IF_ERROR(tar->ReadData([&d](const char* p, size_t n) { d.append(p, n); }));
    }
    listing->entries[entry.name] = entry;
    return Status::OK();
  });
}

class TarReaderFormatTest : public ::testing::TestWithParam<const char*> {};

TEST_P(TarReaderFormatTest, ReadsEveryEntryGnuTarWrites) {
  const Tree t = MakeTree(TestDir("tar_reader"));
  // 3000000 does not fit ustar's 7 octal digits: GNU writes base-256, pax
  // a record; ustar cannot, so it gets a small id.
  const std::string id = std::string(GetParam()) == "ustar" ? "1234" : "3000000";
  Listing l;
  const Status s = List(Archive(t, GetParam(), id), &l);
  ASSERT_TRUE(s.ok()) << s.ToString();

  const std::string deep = "./sub/" + t.long_dir + "/" + t.long_file;
  for (const std::string& name :
       {std::string("./"), std::string("./data"), std::string("./empty"), std::string("./hard"),
        std::string("./link"), std::string("./sub/"), "./sub/" + t.long_dir + "/", deep}) {
    ASSERT_EQ(l.entries.count(name), 1u) << name;
    EXPECT_EQ(l.entries[name].uid, std::stoull(id)) << name;
    EXPECT_EQ(l.entries[name].gid, std::stoull(id)) << name;
  }
  EXPECT_EQ(l.entries.size(), 8u);
  EXPECT_EQ(l.entries["./"].type, TarEntry::kDirectory);
  EXPECT_EQ(l.entries["./data"].type, TarEntry::kFile);
  EXPECT_EQ(l.entries["./data"].size, t.data.size());
  EXPECT_EQ(l.data["./data"], t.data);
  EXPECT_EQ(l.entries["./empty"].size, 0u);
  EXPECT_EQ(l.entries["./link"].type, TarEntry::kSymlink);
  EXPECT_EQ(l.entries["./link"].link_name, "data");
  // --sort=name puts ./data first, so ./hard links to it.
  EXPECT_EQ(l.entries["./hard"].type, TarEntry::kHardLink);
  EXPECT_EQ(l.entries["./hard"].link_name, "./data");
  EXPECT_EQ(l.entries["./hard"].size, 0u);
  EXPECT_EQ(l.entries[deep].type, TarEntry::kFile);
  EXPECT_EQ(l.data[deep], "deep");
}

INSTANTIATE_TEST_SUITE_P(Formats, TarReaderFormatTest,
                         ::testing::Values("gnu", "posix", "ustar"));

TEST(TarReaderTest, AWrongHeaderChecksumIsDataLoss) {
  const Tree t = MakeTree(TestDir("tar_reader"));
  std::string bytes = ReadRaw(Archive(t, "posix", "0"));
  bytes[0] ^= 1;  // a name byte of the first header
  const std::string path = t.root + ".bad.tar";
  WriteRaw(path, bytes);
  Listing l;
  const Status s = List(path, &l);
  EXPECT_EQ(s.code(), Status::Code::kDataLoss);
  EXPECT_NE(s.message().find("wrong checksum"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find(path), std::string::npos) << s.ToString();
}

TEST(TarReaderTest, AnArchiveCutInsideAnEntryIsDataLoss) {
  const Tree t = MakeTree(TestDir("tar_reader"));
  const std::string bytes = ReadRaw(Archive(t, "gnu", "0"));
  // ./data (1503 bytes) is the second entry: header at 512, data from 1024.
  const std::string path = t.root + ".cut.tar";
  WriteRaw(path, bytes.substr(0, 1024 + 700));
  Listing l;
  const Status s = List(path, &l);
  EXPECT_EQ(s.code(), Status::Code::kDataLoss);
  EXPECT_NE(s.message().find("ends inside an entry's data"), std::string::npos) << s.ToString();
}

TEST(TarReaderTest, AnArchiveWithoutItsEndBlocksIsDataLoss) {
  const std::string dir = TestDir("tar_reader");
  WriteRaw(dir + "/one", "x");
  ASSERT_EQ(std::system(("tar --create --format=ustar -f '" + dir + "/one.tar' -C '" + dir +
                         "' one").c_str()),
            0);
  const std::string bytes = ReadRaw(dir + "/one.tar");
  WriteRaw(dir + "/open.tar", bytes.substr(0, 1024));  // header and data, no end
  Listing l;
  const Status s = List(dir + "/open.tar", &l);
  EXPECT_EQ(s.code(), Status::Code::kDataLoss);
  EXPECT_NE(s.message().find("without its end-of-archive blocks"), std::string::npos)
      << s.ToString();
}

TEST(TarReaderTest, BytesThatAreNoTarAreDataLoss) {
  const std::string path = TestDir("tar_reader") + "/text";
  WriteRaw(path, std::string(2048, 'q'));
  Listing l;
  const Status s = List(path, &l);
  EXPECT_EQ(s.code(), Status::Code::kDataLoss);
  EXPECT_NE(s.message().find("wrong checksum"), std::string::npos) << s.ToString();
}

TEST(NormalizeTarNameTest, SpellingsOfOnePathAgree) {
  EXPECT_EQ(NormalizeTarName("./blobs/sha256/"), "blobs/sha256");
  EXPECT_EQ(NormalizeTarName("blobs/sha256"), "blobs/sha256");
  EXPECT_EQ(NormalizeTarName("././usr/bin/env"), "usr/bin/env");
  EXPECT_EQ(NormalizeTarName("./"), "");
  EXPECT_EQ(NormalizeTarName("."), "");
  EXPECT_EQ(NormalizeTarName("a/./b"), "a/./b");  // only the front and back
}

}  // namespace
}  // namespace gaptrain
