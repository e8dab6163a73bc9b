// θ over S masters on loopback (issue 41, spec.master.shards): for P = 25M
// and 100M parameters and S = 1, 2, 4 real gaptrain-master processes
// (GA+DANA, the model declared by this process as a trainer would), one
// trainer's steps per second (a PushPull to every shard at once, as
// MasterSession does), the bytes each master received per push (its
// /metrics), and each master's resident memory (VmRSS after the steps,
// VmHWM its peak, and that peak less what the process held before it had
// a model), the largest master's, printed beside S = 1's of the same P. Every process
// shares this machine's cores: on 2 cores S masters and the trainer's S
// streams contend, so pushes/s shows the cost of the fan-out here and
// memory the gain.
//
//   bazel run -c opt //bench:shard_bench -- [--sizes 25,100] [--steps 6]

#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits.h>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "services/api/master_metric_names.h"
#include "services/base/file_contents.h"
#include "services/base/process.h"
#include "services/engine/shard_plan.h"
#include "services/master/bulk_transfer.h"
#include "services/master/layout_proto.h"
#include "services/master/master_client.h"
#include "services/net/http_client.h"
#include "services/net/metrics_text.h"
#include "services/net/ports_file.h"

namespace gaptrain {
namespace {

using Clock = std::chrono::steady_clock;

// A model of `millions` × 2^20 parameters in tensors of 4M (the last one
// smaller), as a large language or vision model's layers are.
ParameterLayout Layout(size_t millions) {
  ParameterLayout layout;
  size_t left = millions << 20;
  for (int i = 0; left > 0; ++i) {
    const size_t n = std::min<size_t>(left, 4 << 20);
    (void)layout.Add("layer" + std::to_string(i) + ".weight", {static_cast<int64_t>(n)});
    left -= n;
  }
  return layout;
}

std::string WriteJob(const std::string& dir, uint32_t shards) {
  const std::string path = dir + "/job.yaml";
  std::ofstream(path) << "apiVersion: gaptrain.io/v1alpha1\nkind: TrainingJob\n"
                      << "metadata: {name: shard-bench}\nspec:\n"
                      << "  model: {fromTrainer: true}\n"
                      << "  data: {format: custom, trainSamples: 60000}\n"
                      << "  training:\n    batchSize: 64\n    maxUpdates: 1000000\n"
                      << "    optimizer: {learningRate: 0.01, momentum: 0.9}\n"
                      << "    staleness: {rule: gap-aware-dana}\n"
                      << "  master:\n    shards: " << shards << "\n"
                      << "    checkpoint: {intervalSeconds: 86400, keep: 1, path: " << dir
                      << "/ckpt}\n";
  return path;
}

// "VmRSS" or "VmHWM" of `pid`, in MiB.
double MemoryMiB(pid_t pid, const std::string& field) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.compare(0, field.size() + 1, field + ":") == 0) {
      return std::atof(line.c_str() + field.size() + 1) / 1024.0;
    }
  }
  return 0;
}

double ReceivedBytes(uint16_t http_port) {
  HttpClientResponse response;
  if (!HttpGet("127.0.0.1", http_port, "/metrics", 10, &response).ok()) return -1;
  return MetricValue(ParseMetricsText(response.body), master_metric::kReceivedBytesTotal);
}

struct Figures {
  double steps_per_second = 0;
  double bytes_per_master_per_push = 0;  // the most any master received
  double rss_mib = 0, hwm_mib = 0;       // the largest master's
  // The largest master's peak above its resident memory before it held a
  // model (the process itself: gRPC, LibTorch's libraries): what θ and the
  // rule's state cost.
  double model_mib = 0;
};

MasterClient ClientOf(uint16_t port) {
  grpc::ChannelArguments args;
  ApplyBulkTransferArguments(&args);
  MasterClient::Options o;
  o.deadline_seconds = 600;
  return MasterClient(grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                                grpc::InsecureChannelCredentials(), args),
                      o);
}

bool Measure(const std::string& dir, size_t millions, uint32_t shards, int steps,
             Figures* out) {
  std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str());
  const std::string job = WriteJob(dir, shards);
  const ParameterLayout layout = Layout(millions);
  std::vector<ParameterShard> plan;
  if (!PlanShards(layout, shards, &plan).ok()) return false;
  std::vector<std::unique_ptr<Process>> masters(shards);
  std::vector<std::vector<uint16_t>> ports(shards);
  for (uint32_t i = 0; i < shards; ++i) {
    Process::Spec spec;
    spec.binary = "services/master/gaptrain-master";
    const std::string ports_file = dir + "/master-" + std::to_string(i) + ".ports";
    spec.args = {"--job", job, "--listen", "127.0.0.1:0", "--http-address", "127.0.0.1",
                 "--http-port", "0", "--shard", std::to_string(i), "--ports-file", ports_file,
                 "--insecure-no-token"};
    spec.log_file = dir + "/master-" + std::to_string(i) + ".log";
    Status s = Process::Start(spec, &masters[i]);
    if (s.ok()) {
      s = WaitForPortsFile(masters[i].get(), ports_file, 2, std::chrono::seconds(60), &ports[i]);
    }
    if (!s.ok()) {
      std::fprintf(stderr, "shard_bench: master %u: %s (see %s)\n", i, s.ToString().c_str(),
                   spec.log_file.c_str());
      return false;
    }
  }
  std::vector<double> baseline(shards);
  for (uint32_t i = 0; i < shards; ++i) baseline[i] = MemoryMiB(masters[i]->pid(), "VmRSS");
  // Declared as a trainer declares (each shard its slice), then worker 1
  // joins every shard.
  proto::ModelLayout whole;
  LayoutToProto(layout, &whole);
  std::vector<float> theta(layout.size(), 0.01f), gradient(layout.size(), 1e-4f);
  std::vector<MasterClient> clients;
  for (uint32_t i = 0; i < shards; ++i) clients.push_back(ClientOf(ports[i][0]));
  for (uint32_t i = 0; i < shards; ++i) {
    const std::vector<float> slice(theta.begin() + plan[i].begin, theta.begin() + plan[i].end);
    // The master answers the declaring call as it switches servers: the
    // answer may be lost (CANCELLED, UNAVAILABLE), so Describe says when
    // the model is served.
    Status s;
    for (int tries = 0; tries < 600; ++tries) {
      proto::DescribeResponse d;
      s = clients[i].Describe(&d);
      if (s.ok() && !d.awaiting_model()) {
        proto::SetMembersResponse m;
        s = clients[i].SetMembers({1}, &m);
        break;
      }
      if (s.ok()) {
        bool adopted = false;
        s = clients[i].DeclareModel(1, whole, slice, "", &adopted);
        if (!s.ok() && s.code() != Status::Code::kCancelled &&
            s.code() != Status::Code::kUnavailable) {
          break;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (!s.ok()) {
      std::fprintf(stderr, "shard_bench: shard %u: %s\n", i, s.ToString().c_str());
      return false;
    }
  }
  // One step: every shard's PushPull at once, each on its slice.
  std::vector<uint64_t> base(shards, 0);
  std::vector<Status> status(shards);
  auto step = [&] {
    std::vector<std::thread> threads;
    for (uint32_t i = 0; i < shards; ++i) {
      threads.emplace_back([&, i] {
        if (base[i] == 0) {  // the first: a pull, so the rule has the copy
          MasterClient::PullResult r;
          status[i] = clients[i].Pull(1, -1, theta.data() + plan[i].begin, plan[i].size(), &r);
          base[i] = r.version + 1;  // 1 + version: 0 means not pulled yet
          if (!status[i].ok()) return;
        }
        MasterClient::PushPullResult r;
        status[i] = clients[i].PushPull(1, base[i] - 1, gradient.data() + plan[i].begin,
                                        plan[i].size(), 0.5f, nullptr, proto::FLOAT32,
                                        theta.data() + plan[i].begin, &r);
        if (status[i].ok()) base[i] = r.pull.version + 1;
      });
    }
    for (std::thread& t : threads) t.join();
    for (const Status& s : status) {
      if (!s.ok()) {
        std::fprintf(stderr, "shard_bench: %s\n", s.ToString().c_str());
        return false;
      }
    }
    return true;
  };
  if (!step()) return false;  // warm-up: connections, first pulls, reply buffers
  std::vector<double> received_before(shards);
  for (uint32_t i = 0; i < shards; ++i) received_before[i] = ReceivedBytes(ports[i][1]);
  const auto start = Clock::now();
  for (int k = 0; k < steps; ++k) {
    if (!step()) return false;
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  out->steps_per_second = steps / seconds;
  for (uint32_t i = 0; i < shards; ++i) {
    const double per_push = (ReceivedBytes(ports[i][1]) - received_before[i]) / steps;
    out->bytes_per_master_per_push = std::max(out->bytes_per_master_per_push, per_push);
    out->rss_mib = std::max(out->rss_mib, MemoryMiB(masters[i]->pid(), "VmRSS"));
    const double hwm = MemoryMiB(masters[i]->pid(), "VmHWM");
    out->hwm_mib = std::max(out->hwm_mib, hwm);
    out->model_mib = std::max(out->model_mib, hwm - baseline[i]);
  }
  for (auto& m : masters) m->Stop(std::chrono::seconds(60));
  return true;
}

std::vector<size_t> ParseSizes(const std::string& text) {
  std::vector<size_t> sizes;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) sizes.push_back(std::strtoul(item.c_str(), nullptr, 10));
  return sizes;
}

}  // namespace
}  // namespace gaptrain

int main(int argc, char** argv) {
  using namespace gaptrain;
  std::vector<size_t> sizes = {25, 100};
  int steps = 6;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--sizes") {
      sizes = ParseSizes(argv[i + 1]);
    } else if (flag == "--steps") {
      steps = std::max(1, std::atoi(argv[i + 1]));
    } else {
      std::fprintf(stderr, "usage: shard_bench [--sizes 25,100] [--steps 6]\n");
      return 2;
    }
  }
  // The masters are this benchmark's runfiles (bazel run's working
  // directory is <runfiles>/gaptrain).
  char cwd[PATH_MAX];
  if (std::getenv("RUNFILES_DIR") == nullptr && getcwd(cwd, sizeof cwd) != nullptr) {
    const std::string here(cwd);
    setenv("RUNFILES_DIR", here.substr(0, here.rfind('/')).c_str(), 1);
  }
  const std::string dir = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") +
                          "/shard_bench." + std::to_string(getpid());
  std::printf("%-6s %-3s %9s %7s %18s %7s %9s %9s %7s %15s %7s\n", "P", "S", "steps/s", "ratio",
              "bytes/master/push", "ratio", "RSS MiB", "HWM MiB", "ratio", "HWM-start MiB",
              "ratio");
  for (size_t millions : sizes) {
    Figures one;
    for (uint32_t shards : {1u, 2u, 4u}) {
      Figures f;
      if (!Measure(dir + "/p" + std::to_string(millions) + "s" + std::to_string(shards),
                   millions, shards, steps, &f)) {
        return 1;
      }
      if (shards == 1) one = f;
      std::printf("%-6s %-3u %9.2f %7.2f %18.0f %7.3f %9.0f %9.0f %7.3f %15.0f %7.3f\n",
                  (std::to_string(millions) + "Mi").c_str(), shards, f.steps_per_second,
                  f.steps_per_second / one.steps_per_second, f.bytes_per_master_per_push,
                  f.bytes_per_master_per_push / one.bytes_per_master_per_push, f.rss_mib,
                  f.hwm_mib, f.hwm_mib / one.hwm_mib, f.model_mib, f.model_mib / one.model_mib);
      std::fflush(stdout);
    }
  }
  std::system(("rm -rf '" + dir + "'").c_str());
  return 0;
}
