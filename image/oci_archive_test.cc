#include "image/oci_archive.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "image/sha256.h"
#include "services/testing/test_files.h"

namespace gaptrain {
namespace {

using nlohmann::json;

// A ustar member: header, data, padding to 512 bytes.
std::string TarMember(const std::string& name, const std::string& data, char type = '0',
                      const std::string& link = "", unsigned mode = 0644) {
  char h[512] = {};
  std::snprintf(h, 100, "%s", name.c_str());
  std::snprintf(h + 100, 8, "%07o", mode);
  std::snprintf(h + 108, 8, "%07o", 0u);
  std::snprintf(h + 116, 8, "%07o", 0u);
  std::snprintf(h + 124, 12, "%011llo", static_cast<unsigned long long>(data.size()));
  std::snprintf(h + 136, 12, "%011o", 0u);
  h[156] = type;
  std::snprintf(h + 157, 100, "%s", link.c_str());
  std::memcpy(h + 257, "ustar\0" "00", 8);
  std::memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  std::snprintf(h + 148, 8, "%06o", sum);
  std::string member(h, 512);
  member += data;
  member.append((512 - data.size() % 512) % 512, '\0');
  return member;
}

std::string TarEnd() { return std::string(1024, '\0'); }

std::string Gzip(const std::string& bytes) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, bytes.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string DefaultLayer() {
  return TarMember("usr/", "", '5', "", 0755) +
         TarMember("usr/local/bin/tool", "#!/bin/sh\n", '0', "", 0755) +
         TarMember("usr/local/bin/alias", "", '1', "usr/local/bin/tool") + TarEnd();
}

struct Member {
  std::string name;
  std::string bytes;
};

struct Built {
  std::vector<Member> members;
  std::string config_hex;
  std::string manifest_hex;
  std::vector<std::string> layer_hexes;

  std::string& operator[](const std::string& name) {
    for (Member& m : members) {
      if (m.name == name) return m.bytes;
    }
    ADD_FAILURE() << "no member " << name;
    return members[0].bytes;
  }
};

json Descriptor(const char* type, const std::string& bytes) {
  return {{"mediaType", type}, {"digest", "sha256:" + Sha256::Of(bytes)}, {"size", bytes.size()}};
}

// A well-formed archive of `layers` (uncompressed tars), as assemble.sh
// writes it; `diff_id` replaces the last layer's diff_id when set.
Built Build(const std::vector<std::string>& layers, const std::string& diff_id = "") {
  Built b;
  json diff_ids = json::array();
  json layer_descriptors = json::array();
  std::vector<std::string> compressed;
  for (const std::string& tar : layers) {
    diff_ids.push_back("sha256:" + Sha256::Of(tar));
    compressed.push_back(Gzip(tar));
    layer_descriptors.push_back(
        Descriptor("application/vnd.oci.image.layer.v1.tar+gzip", compressed.back()));
    b.layer_hexes.push_back(Sha256::Of(compressed.back()));
  }
  if (!diff_id.empty()) diff_ids.back() = diff_id;
  const std::string config =
      json{{"architecture", "amd64"},
           {"os", "linux"},
           {"config", {{"User", "65532:65532"}, {"Cmd", {"tool"}}}},
           {"rootfs", {{"type", "layers"}, {"diff_ids", diff_ids}}}}
          .dump();
  b.config_hex = Sha256::Of(config);
  const std::string manifest =
      json{{"schemaVersion", 2},
           {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
           {"config", Descriptor("application/vnd.oci.image.config.v1+json", config)},
           {"layers", layer_descriptors}}
          .dump();
  b.manifest_hex = Sha256::Of(manifest);
  json index_entry = Descriptor("application/vnd.oci.image.manifest.v1+json", manifest);
  index_entry["annotations"] = {{"io.containerd.image.name", "docker.io/library/tool:1"},
                                {"org.opencontainers.image.ref.name", "1"}};
  json docker_layers = json::array();
  for (const std::string& hex : b.layer_hexes) docker_layers.push_back("blobs/sha256/" + hex);
  b.members = {
      {"oci-layout", R"({"imageLayoutVersion":"1.0.0"})"},
      {"index.json", json{{"schemaVersion", 2}, {"manifests", {index_entry}}}.dump()},
      {"manifest.json", json::array({{{"Config", "blobs/sha256/" + b.config_hex},
                                      {"RepoTags", {"tool:1"}},
                                      {"Layers", docker_layers}}})
                            .dump()},
      {"blobs/sha256/" + b.manifest_hex, manifest},
      {"blobs/sha256/" + b.config_hex, config},
  };
  for (size_t i = 0; i < layers.size(); ++i) {
    b.members.push_back({"blobs/sha256/" + b.layer_hexes[i], compressed[i]});
  }
  return b;
}

std::string Write(const Built& b, const std::string& dir = "") {
  std::string bytes = TarMember("blobs/", "", '5', "", 0755);
  for (const Member& m : b.members) bytes += TarMember(m.name, m.bytes);
  bytes += TarEnd();
  const std::string path = (dir.empty() ? TestDir("oci_archive") : dir) + "/image.tar";
  WriteRaw(path, bytes);
  return path;
}

Status OpenArchive(const Built& b, std::unique_ptr<OciArchive>* archive) {
  return OciArchive::Open(Write(b), archive);
}

::testing::AssertionResult FailsWith(const Status& s, Status::Code code, const std::string& text) {
  if (s.code() == code && s.message().find(text) != std::string::npos) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "got " << s.ToString() << "; want "
                                       << StatusCodeName(code) << " with '" << text << "'";
}

TEST(OciArchiveTest, OpensAWellFormedArchive) {
  const Built b = Build({DefaultLayer(), TarMember("etc/", "", '5', "", 0755) + TarEnd()});
  std::unique_ptr<OciArchive> archive;
  const Status s = OpenArchive(b, &archive);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(archive->layer_count(), 2u);
  EXPECT_EQ(archive->config()["config"]["User"], "65532:65532");
  EXPECT_EQ(archive->docker_image()["RepoTags"], json::array({"tool:1"}));
  EXPECT_EQ(archive->index()["manifests"][0]["annotations"]["io.containerd.image.name"],
            "docker.io/library/tool:1");
  EXPECT_EQ(archive->compressed_layer_bytes(),
            b.members[5].bytes.size() + b.members[6].bytes.size());

  LayerContents contents;
  const Status layer = archive->CheckLayer(0, &contents);
  ASSERT_TRUE(layer.ok()) << layer.ToString();
  ASSERT_EQ(contents.entries.size(), 3u);
  EXPECT_EQ(contents.entries[1].name, "usr/local/bin/tool");
  EXPECT_EQ(contents.entries[1].mode, 0755u);
  EXPECT_EQ(contents.file_bytes, std::string("#!/bin/sh\n").size());
  EXPECT_TRUE(archive->CheckLayer(1, &contents).ok());
  EXPECT_EQ(archive->CheckLayer(2, &contents).code(), Status::Code::kOutOfRange);
}

TEST(OciArchiveTest, ABlobThatDoesNotHashToItsNameIsDataLoss) {
  Built b = Build({DefaultLayer()});
  std::string& layer = b["blobs/sha256/" + b.layer_hexes[0]];
  layer[layer.size() / 2] ^= 1;
  std::unique_ptr<OciArchive> archive;
  EXPECT_TRUE(FailsWith(OpenArchive(b, &archive), Status::Code::kDataLoss,
                        "blobs/sha256/" + b.layer_hexes[0] + " hashes to sha256:"));
}

TEST(OciArchiveTest, ADiffIdThatIsNotTheUnpackedLayerFailsCheckLayer) {
  const Built b = Build({DefaultLayer()}, "sha256:" + std::string(64, '0'));
  std::unique_ptr<OciArchive> archive;
  ASSERT_TRUE(OpenArchive(b, &archive).ok());
  LayerContents contents;
  EXPECT_TRUE(FailsWith(archive->CheckLayer(0, &contents), Status::Code::kDataLoss,
                        "layer 0 unpacks to sha256:" + Sha256::Of(DefaultLayer()) +
                            ", the config's diff_id is sha256:000"));
}

TEST(OciArchiveTest, DockerLayersInAnotherOrderAreRejected) {
  Built b = Build({DefaultLayer(), TarMember("etc/", "", '5', "", 0755) + TarEnd()});
  json docker = json::parse(b["manifest.json"]);
  std::swap(docker[0]["Layers"][0], docker[0]["Layers"][1]);
  b["manifest.json"] = docker.dump();
  std::unique_ptr<OciArchive> archive;
  EXPECT_TRUE(FailsWith(OpenArchive(b, &archive), Status::Code::kInvalidArgument,
                        "manifest.json: Layers are not the manifest's layers in order"));
}

TEST(OciArchiveTest, DockerConfigThatIsNotTheManifestsIsRejected) {
  Built b = Build({DefaultLayer()});
  json docker = json::parse(b["manifest.json"]);
  docker[0]["Config"] = "blobs/sha256/" + b.manifest_hex;
  b["manifest.json"] = docker.dump();
  std::unique_ptr<OciArchive> archive;
  EXPECT_TRUE(FailsWith(OpenArchive(b, &archive), Status::Code::kInvalidArgument,
                        "manifest.json: Config is not the manifest's config"));
}

TEST(OciArchiveTest, AnIndexWithoutTheContainerdNameIsRejected) {
  Built b = Build({DefaultLayer()});
  json index = json::parse(b["index.json"]);
  index["manifests"][0]["annotations"].erase("io.containerd.image.name");
  b["index.json"] = index.dump();
  std::unique_ptr<OciArchive> archive;
  EXPECT_TRUE(FailsWith(OpenArchive(b, &archive), Status::Code::kInvalidArgument,
                        "index.json manifests[0]: no annotation io.containerd.image.name"));
}

TEST(OciArchiveTest, ADescriptorWithTheWrongSizeIsRejected) {
  Built b = Build({DefaultLayer()});
  json index = json::parse(b["index.json"]);
  index["manifests"][0]["size"] = index["manifests"][0]["size"].get<uint64_t>() + 1;
  b["index.json"] = index.dump();
  std::unique_ptr<OciArchive> archive;
  EXPECT_TRUE(FailsWith(OpenArchive(b, &archive), Status::Code::kInvalidArgument,
                        "index.json manifests[0]: size"));
}

TEST(OciArchiveTest, AnUnreferencedBlobIsRejected) {
  Built b = Build({DefaultLayer()});
  const std::string stray = "left over";
  b.members.push_back({"blobs/sha256/" + Sha256::Of(stray), stray});
  std::unique_ptr<OciArchive> archive;
  EXPECT_TRUE(FailsWith(OpenArchive(b, &archive), Status::Code::kInvalidArgument,
                        "blobs/sha256/" + Sha256::Of(stray) + " is not referenced"));
}

TEST(OciArchiveTest, AnUnexpectedMemberIsRejected) {
  Built b = Build({DefaultLayer()});
  b.members.push_back({"repositories", "{}"});
  std::unique_ptr<OciArchive> archive;
  EXPECT_TRUE(FailsWith(OpenArchive(b, &archive), Status::Code::kInvalidArgument,
                        "unexpected member 'repositories'"));
}

TEST(OciArchiveTest, AMissingMemberIsRejected) {
  Built b = Build({DefaultLayer()});
  b.members.erase(b.members.begin());  // oci-layout
  std::unique_ptr<OciArchive> archive;
  EXPECT_TRUE(
      FailsWith(OpenArchive(b, &archive), Status::Code::kInvalidArgument, ": no oci-layout"));
}

TEST(OciArchiveTest, ATruncatedArchiveIsDataLoss) {
  const std::string path = Write(Build({DefaultLayer()}));
  const std::string bytes = ReadRaw(path);
  WriteRaw(path, bytes.substr(0, bytes.size() - 2048));
  std::unique_ptr<OciArchive> archive;
  EXPECT_EQ(OciArchive::Open(path, &archive).code(), Status::Code::kDataLoss);
}

// Layers that would unpack differently (or not at all) on some runtimes.
struct BadLayer {
  const char* what;
  std::string tar;
  const char* error;
};

void PrintTo(const BadLayer& layer, std::ostream* os) { *os << layer.what; }

class OciArchiveBadLayerTest : public ::testing::TestWithParam<BadLayer> {};

TEST_P(OciArchiveBadLayerTest, CheckLayerNamesTheEntry) {
  const Built b = Build({GetParam().tar + TarEnd()});
  // TestDir() names directories after the test, whose name here has a '/'.
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + GetParam().what;
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0) << dir;
  std::unique_ptr<OciArchive> archive;
  ASSERT_TRUE(OciArchive::Open(Write(b, dir), &archive).ok());
  LayerContents contents;
  EXPECT_TRUE(FailsWith(archive->CheckLayer(0, &contents), Status::Code::kInvalidArgument,
                        GetParam().error));
}

INSTANTIATE_TEST_SUITE_P(
    Entries, OciArchiveBadLayerTest,
    ::testing::Values(
        BadLayer{"device", TarMember("dev/null", "", '3'), "entry 'dev/null': a device node"},
        BadLayer{"absolute", TarMember("/etc/passwd", "x"), "entry '/etc/passwd': an absolute path"},
        BadLayer{"dotdot", TarMember("usr/../../etc/x", "x"), "a path through '..'"},
        BadLayer{"whiteout", TarMember("usr/.wh.lib", ""), "entry 'usr/.wh.lib': a whiteout"},
        BadLayer{"dangling", TarMember("usr/bin/a", "", '1', "usr/bin/b"),
                 "a hard link to 'usr/bin/b', no earlier entry"},
        BadLayer{"self", TarMember("usr/bin/a", "", '1', "usr/bin/a"),
                 "a hard link to 'usr/bin/a'"},
        BadLayer{"twice", TarMember("./usr/bin/a", "1") + TarMember("usr/bin/a", "2"),
                 "entry 'usr/bin/a': a second entry of that name"}),
    [](const ::testing::TestParamInfo<BadLayer>& info) { return std::string(info.param.what); });

}  // namespace
}  // namespace gaptrain
