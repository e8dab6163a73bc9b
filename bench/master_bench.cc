// The master over loopback: pull and push throughput for 1M and 25M
// parameters beside a plain TCP transfer of the same bytes (target: gRPC at
// least 60% of TCP), and pushes per second from 1, 4 and 16 concurrent
// clients for a small model.
//
//   bazel run -c opt //bench:master_bench

#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "services/master/master_client.h"
#include "services/master/master_service.h"

namespace gaptrain {
namespace {

// A master (plain SGD, so every push is applied) serving on loopback.
class Server {
 public:
  explicit Server(size_t size) {
    ParameterLayout layout;
    layout.Add("w", {static_cast<int64_t>(size)});
    UpdateEngine::Options options;
    options.schedule.learning_rate = 1e-6;
    std::unique_ptr<UpdateEngine> engine;
    UpdateEngine::Create(layout, options, &engine);
    std::vector<uint32_t> ids;
    for (uint32_t w = 1; w <= 64; ++w) engine->Join(w);
    auto metrics = std::make_shared<MasterMetrics>(std::make_shared<prometheus::Registry>(),
                                                   engine->store().layout());
    service_ = std::make_unique<MasterService>(std::move(engine), MasterService::Options(),
                                               metrics);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    ApplyBulkTransferArguments(&builder);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
  }
  ~Server() { server_->Shutdown(); }

  MasterClient Client() {
    grpc::ChannelArguments args;
    // A channel per client: separate TCP connections, as separate workers.
    args.SetInt("gaptrain.client", next_client_++);
    ApplyBulkTransferArguments(&args);
    MasterClient::Options o;
    o.chunk_values = MasterService::kMaxChunkValues;
    return MasterClient(grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port_),
                                                  grpc::InsecureChannelCredentials(), args),
                        o);
  }

 private:
  std::unique_ptr<MasterService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  int next_client_ = 0;
};

Server& ServerOf(size_t size) {
  static std::mutex mu;
  static std::map<size_t, std::unique_ptr<Server>> servers;
  std::lock_guard<std::mutex> lock(mu);
  auto& s = servers[size];
  if (!s) s = std::make_unique<Server>(size);
  return *s;
}

std::map<std::string, double> g_bytes_per_second;

void Record(benchmark::State& state, const std::string& name, double bytes) {
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  // Filled in after the run from the reporter's timing.
  state.counters["GBps"] =
      benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsRate);
  (void)name;
}

void BM_Pull(benchmark::State& state) {
  const size_t size = state.range(0);
  Server& server = ServerOf(size);
  MasterClient client = server.Client();
  std::vector<float> theta(size);
  double bytes = 0;
  for (auto _ : state) {
    MasterClient::PullResult r;
    Status s = client.Pull(1, -1, theta.data(), size, &r);
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    bytes += 4.0 * size;
  }
  Record(state, "pull", bytes);
}

void BM_Push(benchmark::State& state) {
  const size_t size = state.range(0);
  Server& server = ServerOf(size);
  MasterClient client = server.Client();
  std::vector<float> g(size, 1e-3f);
  uint64_t version = 0;
  double bytes = 0;
  proto::DescribeResponse d;
  client.Describe(&d);
  version = d.version();
  for (auto _ : state) {
    proto::PushResponse r;
    Status s = client.Push(1, version, g.data(), size, 0, &r);
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    version = r.version();
    bytes += 4.0 * size;
  }
  Record(state, "push", bytes);
}

// The same bytes over a plain loopback TCP connection: what the network
// stack can do with no RPC framing, encoding or copies into messages.
void BM_PlainTcp(benchmark::State& state) {
  const size_t bytes_per_transfer = 4 * state.range(0);
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  listen(listener, 1);
  std::thread reader([&] {
    int fd = accept(listener, nullptr, nullptr);
    std::vector<char> buf(1 << 20);
    while (read(fd, buf.data(), buf.size()) > 0) {
    }
    close(fd);
  });
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  std::vector<char> data(bytes_per_transfer, 1);
  double bytes = 0;
  for (auto _ : state) {
    size_t sent = 0;
    while (sent < data.size()) {
      ssize_t n = write(fd, data.data() + sent, std::min<size_t>(data.size() - sent, 4 << 20));
      if (n <= 0) break;
      sent += n;
    }
    bytes += static_cast<double>(sent);
  }
  close(fd);
  reader.join();
  close(listener);
  Record(state, "tcp", bytes);
}

// Pushes per second of a small model (mlp-sized) with concurrent clients.
void BM_PushesPerSecond(benchmark::State& state) {
  constexpr size_t kSize = 235146;
  Server& server = ServerOf(kSize);
  thread_local std::unique_ptr<MasterClient> client;
  client = std::make_unique<MasterClient>(server.Client());
  std::vector<float> g(kSize, 1e-3f);
  const uint32_t worker = state.thread_index() + 1;
  proto::DescribeResponse d;
  client->Describe(&d);
  uint64_t version = d.version();
  for (auto _ : state) {
    proto::PushResponse r;
    Status s = client->Push(worker, version, g.data(), kSize, 0, &r);
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    version = r.version();
  }
  state.counters["pushes_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

BENCHMARK(BM_PlainTcp)->Arg(1 << 20)->Arg(25 << 20)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Pull)->Arg(1 << 20)->Arg(25 << 20)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Push)->Arg(1 << 20)->Arg(25 << 20)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_PushesPerSecond)
    ->Threads(1)
    ->Threads(4)
    ->Threads(16)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Collects bytes/s per benchmark to print the ratios against TCP.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      auto it = r.counters.find("bytes_per_second");
      if (it != r.counters.end()) rates_[r.benchmark_name()] = it->second.value;
    }
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    std::printf("\nRatios against plain TCP in this run (target >= 0.60):\n");
    for (const char* size : {"1048576", "26214400"}) {
      double tcp = rates_["BM_PlainTcp/" + std::string(size) + "/real_time"];
      for (const char* op : {"BM_Pull", "BM_Push"}) {
        double rate = rates_[std::string(op) + "/" + size + "/real_time"];
        double ratio = tcp > 0 ? rate / tcp : 0;
        std::printf("  %s P=%s: %.2f GB/s vs TCP %.2f GB/s = %.2f %s\n", op + 3, size,
                    rate / 1e9, tcp / 1e9, ratio, ratio >= 0.6 ? "PASS" : "BELOW TARGET");
      }
    }
  }

 private:
  std::map<std::string, double> rates_;
};

}  // namespace
}  // namespace gaptrain

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  gaptrain::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  return 0;
}
