// image_test: builds gaptrain's image archive from IMAGE_BINARIES
// (image/BUILD, this configuration's builds) with image/assemble.sh, as
// scripts/build-image.sh does with the -c opt builds, and checks what
// issue 17 asks of it:
//   - the archive is an OCI image layout and a docker-archive whose blobs
//     hash to their digests and whose layers unpack to the config's
//     diff_ids (OciArchive); podman and containerd, where installed,
//     load it under its name;
//   - every listed binary starts (--help) inside the image's root file
//     system, in its own mount and pid namespaces with /proc, /sys and /dev
//     as a runtime gives them, as the image's user, with every symbol bound
//     at load time (LD_BIND_NOW): no missing shared library or symbol;
//   - the image runs as a non-root user, who can write the pods' volumes
//     and not the binaries;
//   - no compiler, headers, static or -dev libraries, Perl or Python,
//     set-id programs or documentation; its size is printed and bounded;
//   - examples/python/Dockerfile, built by podman on it, makes a trainer
//     image in which `gaptrain run` trains the example's job with Python
//     trainers (issue 39: the trainer Dockerfile built in a test).
// The base layer is cached across runs (image/assemble.sh); building it
// cold takes about 5 minutes on 2 cores, a warm run about half a minute.

#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "image/oci_archive.h"
#include "services/base/process.h"
#include "services/testing/missing_requirement.h"
#include "services/testing/test_files.h"
#include "services/testing/test_processes.h"
#include "services/testing/testdata_dir.h"

namespace gaptrain {
namespace {

using nlohmann::json;

constexpr char kRef[] = "gaptrain:image-test";
constexpr char kRevisionLabel[] = "org.opencontainers.image.revision=image-test";
constexpr char kUser[] = "65532:65532";
// Budgets: Debian's LibTorch alone loads about 540 MiB of libraries (it
// links OpenCV, FFmpeg, GDAL and Qt). The full dependency tree, or a
// compiler, would exceed these.
constexpr double kMaxCompressedMiB = 300;
constexpr double kMaxUnpackedMiB = 850;

// Bazel's PATH for tests lacks the sbin directories (mmdebstrap, chroot).
constexpr char kHostPath[] = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";

double MiB(uint64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

struct RunResult {
  Status status;        // not OK when the command could not be run or timed out
  int exit_code = -1;   // its exit code, -1 when it was killed
  std::string output;   // stdout and stderr
};

// Runs `args` (args[0] an absolute path) with `env` added, up to `timeout`.
RunResult RunCommand(const std::vector<std::string>& args, const std::string& log,
                     const std::vector<std::pair<std::string, std::string>>& env,
                     std::chrono::seconds timeout) {
  RunResult result;
  std::remove(log.c_str());
  Process::Spec spec;
  spec.binary = args[0];
  spec.args.assign(args.begin() + 1, args.end());
  spec.env = env;
  spec.log_file = log;
  std::unique_ptr<Process> process;
  result.status = Process::Start(spec, &process);
  if (!result.status.ok()) return result;
  if (!process->WaitExit(timeout)) {
    process->Stop(std::chrono::seconds(5));
    result.status = Status(Status::Code::kDeadlineExceeded,
                           args[0] + " ran longer than " + std::to_string(timeout.count()) + "s");
  }
  const int w = process->wait_status();
  if (WIFEXITED(w)) result.exit_code = WEXITSTATUS(w);
  result.output = ReadRaw(log);
  return result;
}

// The runtime a container gets, minimally: new mount and pid namespaces,
// /proc, a read-only /sys, a /dev with the usual nodes, then chroot as the
// image's user. $1 is the root, $2 the user, the rest the command.
constexpr char kEnterImage[] = R"(set -e
root=$1; user=$2; shift 2
mount -t proc proc "$root/proc"
mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$root/sys"
mount -t tmpfs -o mode=0755,nosuid tmpfs "$root/dev"
for node in null zero full random urandom; do
  : > "$root/dev/$node"
  mount --bind "/dev/$node" "$root/dev/$node"
done
mkdir "$root/dev/shm"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$root/dev/shm"
exec chroot --userspec="$user" "$root" "$@"
)";

class ImageTest : public ::testing::Test {
 protected:
  struct Built {
    Status status;
    std::string dir;
    std::string archive_path;
    std::unique_ptr<OciArchive> archive;
    std::vector<LayerContents> layers;
    std::vector<std::string> binaries;  // runfiles paths
    std::string rootfs;
  };
  static Built* built_;

  static void SetUpTestSuite() {
    built_ = new Built;
    if (::geteuid() != 0) return;  // each test skips
    built_->status = Build(built_);
  }

  static void TearDownTestSuite() {
    // The unpacked image and the archive take a gigabyte.
    if (!built_->dir.empty()) {
      const int rc = std::system(("rm -rf '" + built_->dir + "'").c_str());
      (void)rc;
    }
    delete built_;
    built_ = nullptr;
  }

  void SetUp() override {
    if (::geteuid() != 0) {
      GAPTRAIN_SKIP_OR_FAIL_IN_CI(
          "building the image needs root (mmdebstrap's root mode, unshare, chroot)");
    }
    ASSERT_TRUE(built_->status.ok()) << built_->status.ToString();
  }

  static std::string CacheDir() {
    if (const char* dir = std::getenv("GAPTRAIN_IMAGE_CACHE")) return dir;
    // Bazel points HOME at the test's temporary directory; the cache
    // belongs to the real user, shared with scripts/build-image.sh.
    const passwd* pw = ::getpwuid(::getuid());
    return std::string(pw != nullptr ? pw->pw_dir : "/root") + "/.cache/gaptrain-image";
  }

  static Status Build(Built* b) {
    b->dir = TestTempDir("image");
    std::istringstream list(ReadRaw("image/binaries.txt"));
    for (std::string line; std::getline(list, line);) {
      if (!line.empty()) b->binaries.push_back(line);
    }
    if (b->binaries.empty()) return Status::Internal("image/binaries.txt lists no binary");

    char cwd[4096];
    if (::getcwd(cwd, sizeof cwd) == nullptr) return Status::Internal("getcwd failed");
    b->archive_path = b->dir + "/gaptrain.tar";
    std::vector<std::string> args = {std::string(cwd) + "/image/assemble.sh",
                                     "--output", b->archive_path,
                                     "--tag", kRef,
                                     "--cache-dir", CacheDir(),
                                     "--label", kRevisionLabel,
                                     "--created", "1700000000"};
    for (const std::string& binary : b->binaries) args.push_back(std::string(cwd) + "/" + binary);
    const auto start = std::chrono::steady_clock::now();
    // TMPDIR=/tmp: apt's sandbox user must reach mmdebstrap's temporary
    // root, which it cannot under root's home (where TEST_TMPDIR is).
    const RunResult assemble =
        RunCommand(args, b->dir + "/assemble.log",
            {{"PATH", kHostPath}, {"TMPDIR", "/tmp"}},
            std::chrono::seconds(840));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cout << assemble.output << "image/assemble.sh took " << seconds << " s\n";
    GAPTRAIN_RETURN_IF_ERROR(assemble.status);
    if (assemble.exit_code != 0) {
      return Status::Internal("image/assemble.sh failed (exit code " +
                              std::to_string(assemble.exit_code) + "):\n" + assemble.output);
    }

    GAPTRAIN_RETURN_IF_ERROR(OciArchive::Open(b->archive_path, &b->archive));
    for (size_t i = 0; i < b->archive->layer_count(); ++i) {
      b->layers.emplace_back();
      GAPTRAIN_RETURN_IF_ERROR(b->archive->CheckLayer(i, &b->layers.back()));
    }

    // Unpack the layers in order, as a runtime does (they hold no
    // whiteouts: CheckLayer).
    b->rootfs = b->dir + "/rootfs";
    std::string unpack = "set -e; mkdir -p '" + b->dir + "/oci' '" + b->rootfs + "'; tar -xf '" +
                         b->archive_path + "' -C '" + b->dir + "/oci'";
    for (const json& layer : b->archive->manifest()["layers"]) {
      unpack += "; tar -xzf '" + b->dir + "/oci/blobs/sha256/" +
                layer["digest"].get<std::string>().substr(7) + "' -C '" + b->rootfs +
                "' --numeric-owner";
    }
    unpack += "; rm -rf '" + b->dir + "/oci'";
    if (std::system(unpack.c_str()) != 0) return Status::Internal("unpacking failed: " + unpack);
    return Status::OK();
  }

  // Runs `command` inside the image as `user`, with the image's PATH.
  static RunResult RunInImage(const std::vector<std::string>& command, const std::string& log,
                              const std::string& user = kUser) {
    std::vector<std::string> args = {
        "/usr/bin/unshare", "--mount", "--pid", "--fork", "--kill-child", "--",
        "/bin/sh", "-c", kEnterImage, "enter-image", built_->rootfs, user,
        "/usr/bin/env", "-i", "--chdir=/var/lib/gaptrain", ImagePath(), "HOME=/var/lib/gaptrain",
        "LD_BIND_NOW=1"};
    args.insert(args.end(), command.begin(), command.end());
    return RunCommand(args, built_->dir + "/" + log, {{"PATH", kHostPath}},
                      std::chrono::seconds(120));
  }

  static std::string ImagePath() {
    for (const json& e : built_->archive->config()["config"]["Env"]) {
      if (e.get<std::string>().rfind("PATH=", 0) == 0) return e.get<std::string>();
    }
    return "PATH=";
  }

  static std::string Basename(const std::string& path) {
    return path.substr(path.rfind('/') + 1);
  }

  // Every entry of every layer, by normalised path ("usr/bin/env").
  static std::map<std::string, TarEntry> MergedEntries() {
    std::map<std::string, TarEntry> merged;
    for (const LayerContents& layer : built_->layers) {
      for (const TarEntry& e : layer.entries) {
        merged[NormalizeTarName(e.name)] = e;
      }
    }
    return merged;
  }
};

ImageTest::Built* ImageTest::built_ = nullptr;

TEST_F(ImageTest, ArchiveNamesTheImageForEveryLoader) {
  const OciArchive& a = *built_->archive;
  EXPECT_EQ(a.docker_image()["RepoTags"], json::array({kRef}));
  const json& annotations = a.index()["manifests"][0]["annotations"];
  EXPECT_EQ(annotations["io.containerd.image.name"], "docker.io/library/gaptrain:image-test");
  EXPECT_EQ(annotations["org.opencontainers.image.ref.name"], "image-test");
  EXPECT_EQ(a.config()["os"], "linux");
  EXPECT_EQ(a.config()["architecture"], "amd64");
  // The base, then the binaries.
  ASSERT_EQ(a.layer_count(), 2u);
}

// The loaders themselves, where they are installed: podman (containers/image,
// as `podman load` and skopeo read it) and containerd (`ctr images import`
// with the flags `kind load image-archive` passes), each with its own
// storage under the test's directory.
TEST_F(ImageTest, PodmanAndContainerdLoadIt) {
  // Sockets and podman's run root under /tmp: their paths must be short
  // (108 bytes for a socket, 50 for podman's run root).
  char short_template[] = "/tmp/gaptrain-loaders.XXXXXX";
  ASSERT_NE(::mkdtemp(short_template), nullptr);
  const std::string short_dir = short_template;
  bool ran = false;
  if (::access("/usr/bin/podman", X_OK) == 0) {
    ran = true;
    const RunResult load = RunCommand(
        {"/usr/bin/podman", "--root", built_->dir + "/podman", "--runroot", short_dir + "/podman",
         "--storage-driver", "vfs", "load", "-i", built_->archive_path},
        built_->dir + "/podman-load.log", {{"PATH", kHostPath}}, std::chrono::seconds(300));
    ASSERT_TRUE(load.status.ok()) << load.status.ToString();
    EXPECT_EQ(load.exit_code, 0) << load.output;
    // podman qualifies the name: "Loaded image: docker.io/library/gaptrain:image-test".
    EXPECT_TRUE(std::regex_search(load.output, std::regex(std::string("Loaded image: .*") + kRef)))
        << load.output;
  }
  if (::access("/usr/bin/containerd", X_OK) == 0 && ::access("/usr/bin/ctr", X_OK) == 0) {
    ran = true;
    const std::string root = short_dir + "/containerd";
    ASSERT_EQ(::mkdir(root.c_str(), 0700), 0);
    const std::string socket = root + "/containerd.sock";
    std::ofstream(root + "/config.toml")
        << "version = 2\nroot = \"" << root << "/root\"\nstate = \"" << root
        << "/state\"\ndisabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n[grpc]\n  address = \""
        << socket << "\"\n";
    Process::Spec spec;
    spec.binary = "/usr/bin/containerd";
    spec.args = {"--config", root + "/config.toml"};
    spec.env = {{"PATH", kHostPath}};
    spec.log_file = built_->dir + "/containerd.log";
    std::unique_ptr<Process> containerd;
    ASSERT_TRUE(Process::Start(spec, &containerd).ok());
    const auto ctr = [&socket](std::vector<std::string> args, const std::string& log) {
      args.insert(args.begin(), {"/usr/bin/ctr", "--address", socket, "--namespace", "k8s.io"});
      return RunCommand(args, log, {{"PATH", kHostPath}}, std::chrono::seconds(300));
    };
    const bool up = Eventually(
        [&] { return ctr({"version"}, built_->dir + "/ctr-version.log").exit_code == 0; },
        std::chrono::seconds(30));
    ASSERT_TRUE(up) << ReadRaw(spec.log_file);
    const RunResult import = ctr({"images", "import", "--all-platforms", "--digests",
                                  "--snapshotter", "native", built_->archive_path},
                                 built_->dir + "/ctr-import.log");
    EXPECT_EQ(import.exit_code, 0) << import.output;
    const RunResult list = ctr({"images", "ls", "-q"}, built_->dir + "/ctr-ls.log");
    EXPECT_NE(list.output.find("docker.io/library/gaptrain:image-test\n"), std::string::npos)
        << list.output;
    containerd->Stop(std::chrono::seconds(10));
  }
  EXPECT_EQ(std::system(("rm -rf '" + short_dir + "'").c_str()), 0);
  if (!ran) {
    GAPTRAIN_SKIP_OR_FAIL_IN_CI(
        "neither podman nor containerd is installed (scripts/bootstrap.sh --image)");
  }
}

TEST_F(ImageTest, ConfigRunsAsNonRootWithoutAnEntrypoint) {
  const json& config = built_->archive->config()["config"];
  EXPECT_EQ(config["User"], kUser);  // numeric: runAsNonRoot can check it
  EXPECT_FALSE(config.contains("Entrypoint") && !config["Entrypoint"].is_null());
  EXPECT_EQ(config["Cmd"], json::array({"gaptrain", "--help"}));
  EXPECT_EQ(config["WorkingDir"], "/var/lib/gaptrain");
  EXPECT_NE(ImagePath().find(":/usr/local/bin:"), std::string::npos) << ImagePath();
  EXPECT_EQ(config["Labels"]["org.opencontainers.image.revision"], "image-test");
}

TEST_F(ImageTest, HoldsExactlyTheListedBinaries) {
  std::set<std::string> expected;
  for (const std::string& binary : built_->binaries) expected.insert(Basename(binary));
  std::set<std::string> in_image;
  for (const TarEntry& e : built_->layers.back().entries) {
    if (e.type != TarEntry::kFile) continue;
    EXPECT_EQ(e.name.rfind("./usr/local/bin/", 0), 0u) << e.name;
    EXPECT_EQ(e.mode, 0755u) << e.name;
    EXPECT_EQ(e.uid, 0u) << e.name;
    in_image.insert(Basename(e.name));
  }
  EXPECT_EQ(in_image, expected);
  for (const std::string& binary : built_->binaries) {
    EXPECT_TRUE(ReadRaw(built_->rootfs + "/usr/local/bin/" + Basename(binary)) ==
                ReadRaw(binary))
        << binary << " differs from the build";
  }
}

TEST_F(ImageTest, EveryBinaryStartsInsideTheImage) {
  ASSERT_FALSE(built_->binaries.empty());
  for (const std::string& binary : built_->binaries) {
    const std::string name = Basename(binary);
    const RunResult r = RunInImage({name, "--help"}, name + ".log");
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(r.exit_code, 0) << name << " --help in the image:\n" << r.output;
    EXPECT_NE(r.output.find("usage: " + name), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("error while loading shared libraries"), std::string::npos)
        << r.output;
  }
}

TEST_F(ImageTest, RunsAsTheNonRootUserWhoOwnsTheVolumes) {
  const RunResult id = RunInImage({"id"}, "id.log");
  ASSERT_TRUE(id.status.ok()) << id.status.ToString();
  EXPECT_EQ(id.output, "uid=65532(gaptrain) gid=65532(gaptrain) groups=65532(gaptrain)\n");

  // The pods' mount points: ConfigMap and Secret root's (mounted read-only),
  // the PVCs' directories the user's.
  const RunResult dirs = RunInImage(
      {"stat", "-c", "%n %u:%g %a", "/etc/gaptrain", "/var/run/gaptrain/", "/var/lib/gaptrain",
       "/var/lib/gaptrain/checkpoints", "/var/lib/gaptrain/coordinator"},
      "stat.log");
  EXPECT_EQ(dirs.output,
            "/etc/gaptrain 0:0 755\n/var/run/gaptrain/ 0:0 755\n/var/lib/gaptrain 65532:65532 755\n"
            "/var/lib/gaptrain/checkpoints 65532:65532 755\n"
            "/var/lib/gaptrain/coordinator 65532:65532 755\n");

  const RunResult writes = RunInImage({"touch", "/var/lib/gaptrain/checkpoints/probe"}, "w.log");
  EXPECT_EQ(writes.exit_code, 0) << writes.output;
  const RunResult denied = RunInImage({"touch", "/usr/local/bin/probe"}, "denied.log");
  EXPECT_NE(denied.exit_code, 0) << "the user may write /usr/local/bin";
  EXPECT_NE(denied.output.find("Permission denied"), std::string::npos) << denied.output;
}

TEST_F(ImageTest, HoldsNoCompilerHeadersInterpreterOrSetIdPrograms) {
  const std::regex compiler(
      R"((usr/)?s?bin/(x86_64-linux-gnu-)?(gcc|g\+\+|cc|c\+\+|cpp|clang|clang\+\+|ld|as|make)(-[0-9.]+)?|usr/lib/gcc(/.*)?|usr/libexec/gcc(/.*)?)");
  for (const auto& [name, e] : MergedEntries()) {
    EXPECT_FALSE(std::regex_match(name, compiler)) << name;
    EXPECT_NE(name.rfind("usr/include/", 0), 0u) << name;
    const bool code = name.size() > 2 && (name.compare(name.size() - 2, 2, ".h") == 0 ||
                                          name.compare(name.size() - 2, 2, ".a") == 0);
    EXPECT_FALSE(e.type == TarEntry::kFile && code) << name;
    if (e.type == TarEntry::kFile) {
      EXPECT_EQ(e.mode & 06000, 0u) << name << " is set-user-ID or set-group-ID";
      for (const char* dir : {"usr/share/man/", "usr/share/info/", "usr/share/locale/"}) {
        EXPECT_NE(name.rfind(dir, 0), 0u) << name;
      }
      if (name.rfind("usr/share/doc/", 0) == 0) {
        EXPECT_EQ(Basename(name), "copyright") << name;
      }
    }
  }
  // No compiler, development or interpreter package is installed.
  const std::regex unwanted(
      R"((gcc|g\+\+|cpp|clang|binutils|make|perl|python3)(-[0-9.]+)?|.*-dev|perl-modules-.*|libperl.*)");
  std::istringstream status(ReadRaw(built_->rootfs + "/var/lib/dpkg/status"));
  int packages = 0;
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Package: ", 0) != 0) continue;
    ++packages;
    EXPECT_FALSE(std::regex_match(line.substr(9), unwanted)) << line;
  }
  EXPECT_GT(packages, 0);
  std::cout << "image: " << packages << " Debian packages\n";
}

TEST_F(ImageTest, SizeIsReportedAndBounded) {
  const double compressed = MiB(built_->archive->compressed_layer_bytes());
  uint64_t unpacked_bytes = 0;
  for (const LayerContents& layer : built_->layers) unpacked_bytes += layer.file_bytes;
  const double unpacked = MiB(unpacked_bytes);
  const double base = MiB(built_->layers.front().file_bytes);
  const double binaries = MiB(built_->layers.back().file_bytes);
  std::cout << "image: " << compressed << " MiB compressed, " << unpacked
            << " MiB unpacked (base " << base << " MiB, binaries " << binaries << " MiB)\n";
  RecordProperty("compressed_mib", std::to_string(compressed));
  RecordProperty("unpacked_mib", std::to_string(unpacked));
  EXPECT_LE(compressed, kMaxCompressedMiB);
  EXPECT_LE(unpacked, kMaxUnpackedMiB);
}

// podman as this project's machines let it start containers: its own
// storage under `dir` (not the user's), runc with cgroupfs (crun refuses
// these VMs' hybrid cgroup v1 + v2 hierarchy, and no systemd runs), events
// to a file. `dir` must be short: podman's run root below it is bounded.
std::vector<std::string> Podman(const std::string& dir, std::vector<std::string> args) {
  std::vector<std::string> command = {
      "/usr/bin/podman",     "--root",         dir + "/root", "--runroot", dir + "/run",
      "--storage-driver",    "overlay",        "--runtime",   "runc",      "--cgroup-manager",
      "cgroupfs",            "--events-backend", "file"};
  command.insert(command.end(), args.begin(), args.end());
  return command;
}

// A container's resource limits. podman's defaults (RLIMIT_NOFILE 2^20,
// RLIMIT_NPROC the host's) exceed what a process may raise its limits to
// without CAP_SYS_RESOURCE, which these VMs do not grant even to root.
const std::vector<std::string> kContainerLimits = {"--ulimit", "nofile=16384:16384", "--ulimit",
                                                   "nproc=4096:4096"};

// The trainer image's job: job-cluster.yaml's model, data, trainers and
// GA+DANA, short (maxUpdates), run by `gaptrain run` inside the image.
constexpr char kTrainerImageJob[] = R"(apiVersion: gaptrain.io/v1alpha1
kind: TrainingJob
metadata:
  name: python-fashion-cnn
spec:
  model: {torchscript: /app/fashion_cnn.pt}
  data: {format: mnist-idx, path: /data/fashion-mnist, shuffleSeed: 1}
  training:
    batchSize: 64
    maxUpdates: 400
    optimizer: {learningRate: 0.05, momentum: 0.9, weightDecay: 1.0e-4}
    staleness: {rule: gap-aware-dana}
  workers:
    replicas: 2
    template:
      spec:
        containers:
        - command: [python3, /app/train.py]
)";

// debian:12-slim, which the Dockerfile starts from, as a root file system
// archive for `podman import`. A stand-in: Docker Hub is out of reach
// here, so mmdebstrap builds what the official image is built from,
// Debian 12's minbase from Debian's archive. Cached next to the image's
// base (delete it to rebuild).
Status DebianSlimArchive(const std::string& cache_dir, std::string* path) {
  *path = cache_dir + "/debian-12-slim.tar";
  if (::access(path->c_str(), R_OK) == 0) return Status::OK();
  const std::string partial = *path + ".partial";
  const RunResult r = RunCommand(
      {"/usr/bin/mmdebstrap", "--variant=minbase", "--mode=root", "--format=tar",
       "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr", "bookworm", partial,
       "deb http://deb.debian.org/debian bookworm main",
       "deb http://deb.debian.org/debian bookworm-updates main",
       "deb http://deb.debian.org/debian-security bookworm-security main"},
      cache_dir + "/debian-12-slim.log", {{"PATH", kHostPath}, {"TMPDIR", "/tmp"}},
      std::chrono::seconds(600));
  GAPTRAIN_RETURN_IF_ERROR(r.status);
  if (r.exit_code != 0) return Status::Internal("mmdebstrap failed:\n" + r.output);
  if (std::rename(partial.c_str(), path->c_str()) != 0) {
    return Status::Internal("cannot rename " + partial);
  }
  return Status::OK();
}

// What a user does with examples/python/Dockerfile: load gaptrain's image
// (this archive, under the name the Dockerfile gives), build, then run the
// result. Inside it `gaptrain run` starts the master, coordinator and
// evaluator (the image's binaries, reading /app/fashion_cnn.pt) and two
// Python trainers (/app/train.py: the SDK and Debian's PyTorch from the
// image), as the cluster's pods would; the data is mounted read-only.
TEST_F(ImageTest, TrainerDockerfileBuildsAnImageThatTrains) {
  if (::access("/usr/bin/podman", X_OK) != 0 || ::access("/usr/bin/runc", X_OK) != 0) {
    GAPTRAIN_SKIP_OR_FAIL_IN_CI("podman and runc are not installed (scripts/bootstrap.sh --image)");
  }
  std::string data_dir;
  const Status data = FindSharedDataDir(&data_dir);
  ASSERT_TRUE(data.ok()) << data.ToString();
  char short_template[] = "/tmp/gaptrain-podman.XXXXXX";
  ASSERT_NE(::mkdtemp(short_template), nullptr);
  const std::string dir = short_template;
  const auto podman = [&dir](std::vector<std::string> args, const std::string& log,
                             int timeout_seconds = 300) {
    return RunCommand(Podman(dir, std::move(args)), dir + "/" + log, {{"PATH", kHostPath}},
                      std::chrono::seconds(timeout_seconds));
  };
  const auto succeeded = [](const RunResult& r) {
    return r.status.ok() && r.exit_code == 0;
  };

  const RunResult load = podman({"load", "-i", built_->archive_path}, "load.log");
  ASSERT_TRUE(succeeded(load)) << load.status.ToString() << load.output;
  ASSERT_TRUE(succeeded(podman({"tag", kRef, "ghcr.io/gaptrain/gaptrain:0.1.0"}, "tag.log")));
  std::string slim;
  const Status slim_built = DebianSlimArchive(CacheDir(), &slim);
  ASSERT_TRUE(slim_built.ok()) << slim_built.ToString();
  const RunResult import = podman({"import", slim, "docker.io/library/debian:12-slim"},
                                  "import.log");
  ASSERT_TRUE(succeeded(import)) << import.output;

  // The build context: the checkout's files the Dockerfile copies (copied,
  // not the runfiles' symlinks, which COPY would keep as links).
  const std::string context = dir + "/context";
  ASSERT_EQ(std::system(("set -e; mkdir -p '" + context + "/image' '" + context +
                         "/examples' '" + context + "/python'; cp -L image/rootfs-setup.sh '" +
                         context + "/image/'; cp -rL examples/python '" + context +
                         "/examples/'; cp -rL python/gaptrain '" + context + "/python/'")
                            .c_str()),
            0);
  // apt's downloads kept for the next run (the Dockerfile installs about
  // 250 MB of packages).
  const std::string apt_cache = CacheDir() + "/trainer-apt-archives";
  ASSERT_EQ(std::system(("mkdir -p '" + apt_cache + "/partial'").c_str()), 0);
  std::vector<std::string> build = {"build", "--network", "host", "--volume",
                                    apt_cache + ":/var/cache/apt/archives"};
  build.insert(build.end(), kContainerLimits.begin(), kContainerLimits.end());
  build.insert(build.end(), {"-f", context + "/examples/python/Dockerfile", "-t",
                             "gaptrain-fashion-cnn:image-test", context});
  const auto build_start = std::chrono::steady_clock::now();
  const RunResult built = podman(build, "build.log", 1200);
  std::cout << "podman build took "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - build_start)
                   .count()
            << " s\n";
  ASSERT_TRUE(succeeded(built)) << built.status.ToString() << "\n" << built.output;

  std::ofstream(dir + "/job.yaml") << kTrainerImageJob;
  const std::string run_dir = dir + "/run-dir";
  ASSERT_EQ(::mkdir(run_dir.c_str(), 0755), 0);
  ASSERT_EQ(::chown(run_dir.c_str(), 65532, 65532), 0);
  std::vector<std::string> run = {"run", "--rm", "--network", "none",
                                  "--volume", data_dir + "/fashion-mnist:/data/fashion-mnist:ro",
                                  "--volume", dir + "/job.yaml:/app/job.yaml:ro",
                                  "--volume", run_dir + ":/var/lib/gaptrain/run"};
  run.insert(run.end(), kContainerLimits.begin(), kContainerLimits.end());
  run.insert(run.end(), {"gaptrain-fashion-cnn:image-test", "gaptrain", "run", "-f",
                         "/app/job.yaml", "--run-dir", "/var/lib/gaptrain/run/job",
                         "--data-cache", "none"});
  const RunResult trained = podman(run, "run.log", 600);
  std::cout << trained.output;
  ASSERT_TRUE(trained.status.ok()) << trained.status.ToString();
  EXPECT_EQ(trained.exit_code, 0) << trained.output;
  EXPECT_NE(trained.output.find("job python-fashion-cnn: Succeeded"), std::string::npos);

  const json summary = json::parse(ReadRaw(run_dir + "/job/summary.json"), nullptr, false);
  ASSERT_TRUE(summary.is_object()) << ReadRaw(run_dir + "/job/summary.json");
  std::cout << "trainer image: " << summary.dump() << "\n";
  EXPECT_GE(summary.value("accuracy", 0.0), 0.70) << summary.dump();
  // The trainers were the image's Python script: the SDK registered them.
  for (const char* trainer : {"trainer-0", "trainer-1"}) {
    const std::string log = ReadRaw(run_dir + "/job/logs/" + trainer + ".log");
    EXPECT_NE(log.find("gaptrain: registered as worker"), std::string::npos)
        << trainer << ":\n" << log;
  }

  EXPECT_EQ(std::system(("rm -rf '" + dir + "'").c_str()), 0);
}

}  // namespace
}  // namespace gaptrain
