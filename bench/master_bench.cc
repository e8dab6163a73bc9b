// The master over loopback: pull and push throughput for 1M and 25M
// parameters beside a plain TCP transfer of the same bytes (target: gRPC at
// least 60% of TCP), pushes per second from 1, 4 and 16 concurrent
// clients for a small model, and a LeNet-5 trainer's PushPull round trip.
// The masters run in a child process, as a master and its workers do;
// --in_process keeps them in this one.
//
//   bazel build -c opt //bench:master_bench && bazel-bin/bench/master_bench

#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "services/base/available_cpus.h"
#include "services/base/heap_policy.h"
#include "services/master/master_client.h"
#include "services/master/master_service.h"

namespace gaptrain {
namespace {

constexpr size_t kPushesPerSecondSize = 235146;  // the mlp's parameters
constexpr size_t kLenet5Size = 61706;            // the README job's model
constexpr size_t kSizes[] = {1 << 20, 25 << 20, kPushesPerSecondSize, kLenet5Size};

// A master (plain SGD, so every push is applied; 64 joined workers; one
// update thread per CPU, as gaptrain-master by default) serving on
// loopback.
class Server {
 public:
  explicit Server(size_t size) {
    ParameterLayout layout;
    layout.Add("w", {static_cast<int64_t>(size)});
    UpdateEngine::Options options;
    options.schedule.learning_rate = 1e-6;
    options.rule.num_threads = AvailableCpus();  // the master's default (updateThreads: 0)
    std::unique_ptr<UpdateEngine> engine;
    UpdateEngine::Create(layout, options, &engine);
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
  int port() const { return port_; }

 private:
  std::unique_ptr<MasterService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

// Where the master of each size listens. By default the masters run in a
// child process, as a master and its workers do (each process then has
// its own gRPC pollers and threads); --in_process keeps them in this one.
std::map<size_t, int> g_ports;
std::vector<std::unique_ptr<Server>> g_in_process_servers;
pid_t g_server_pid = 0;  // the masters' process; 0 when they run in this one

// CPU seconds used so far by this process and the masters' process, all
// threads: what a transfer costs the machine, whichever side pays.
double MachineCpuSeconds() {
  auto seconds = [](clockid_t clock) {
    timespec t{};
    clock_gettime(clock, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  };
  double total = seconds(CLOCK_PROCESS_CPUTIME_ID);
  clockid_t server_clock;
  if (g_server_pid != 0 && clock_getcpuclockid(g_server_pid, &server_clock) == 0) {
    total += seconds(server_clock);
  }
  return total;
}

// Measures the CPU both processes spend over one benchmark run. Only the
// first thread measures, from its first iteration (the run's threads start
// their loops together, after every thread's setup) to its loop's end.
class CpuMeter {
 public:
  explicit CpuMeter(const benchmark::State& state) : active_(state.thread_index() == 0) {}
  // Call at the top of every iteration; the first starts the clock.
  void StartOnce() {
    if (active_ && start_ < 0) start_ = MachineCpuSeconds();
  }
  // Sets "cpu_ns_per_byte": machine CPU per byte moved by all threads,
  // `bytes_per_thread` each.
  void Report(benchmark::State& state, double bytes_per_thread) const {
    if (!active_ || start_ < 0 || bytes_per_thread <= 0) return;
    const double cpu = MachineCpuSeconds() - start_;
    state.counters["cpu_ns_per_byte"] = 1e9 * cpu / (bytes_per_thread * state.threads());
  }

 private:
  const bool active_;
  double start_ = -1;
};

void StartServersInProcess() {
  for (size_t size : kSizes) {
    g_in_process_servers.push_back(std::make_unique<Server>(size));
    g_ports[size] = g_in_process_servers.back()->port();
  }
}

// Forks the server process before this one uses gRPC. The child serves
// until this process exits (its end of `control` then reads EOF).
void StartServerProcess() {
  int ports[2], control[2];
  if (pipe(ports) != 0 || pipe(control) != 0) std::abort();
  const pid_t pid = fork();
  if (pid < 0) std::abort();
  if (pid == 0) {
    close(ports[0]);
    close(control[1]);
    std::vector<std::unique_ptr<Server>> servers;
    for (size_t size : kSizes) {
      servers.push_back(std::make_unique<Server>(size));
      int port = servers.back()->port();
      if (write(ports[1], &port, sizeof port) != sizeof port) _exit(1);
    }
    close(ports[1]);
    char c;
    while (read(control[0], &c, 1) > 0) {
    }
    _exit(0);  // skips destructors: nothing to flush
  }
  g_server_pid = pid;
  close(ports[1]);
  close(control[0]);  // control[1] stays open until this process exits
  for (size_t size : kSizes) {
    int port = 0;
    if (read(ports[0], &port, sizeof port) != sizeof port) std::abort();
    g_ports[size] = port;
  }
  close(ports[0]);
}

// A client with its own channel: separate TCP connections, as separate
// workers.
MasterClient ClientOf(size_t size) {
  static std::atomic<int> next_client{0};
  grpc::ChannelArguments args;
  args.SetInt("gaptrain.client", next_client++);
  ApplyBulkTransferArguments(&args);
  return MasterClient(grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(g_ports.at(size)),
                                                grpc::InsecureChannelCredentials(), args),
                      MasterClient::Options());
}

void Record(benchmark::State& state, const std::string& name, double bytes) {
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  // Filled in after the run from the reporter's timing.
  state.counters["GBps"] =
      benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsRate);
  (void)name;
}

void BM_Pull(benchmark::State& state) {
  const size_t size = state.range(0);
  MasterClient client = ClientOf(size);
  std::vector<float> theta(size);
  double bytes = 0;
  CpuMeter cpu(state);
  for (auto _ : state) {
    cpu.StartOnce();
    MasterClient::PullResult r;
    Status s = client.Pull(1, -1, theta.data(), size, &r);
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    bytes += 4.0 * size;
  }
  cpu.Report(state, bytes);
  Record(state, "pull", bytes);
}

// A pull right after a push, so every pull finds a new version and the
// master copies θ into a fresh reply (BM_Pull's pulls share one). The push
// is not timed.
void BM_PullAfterPush(benchmark::State& state) {
  const size_t size = state.range(0);
  MasterClient client = ClientOf(size);
  std::vector<float> theta(size), g(size, 1e-3f);
  proto::DescribeResponse d;
  client.Describe(&d);
  uint64_t version = d.version();
  double bytes = 0;
  for (auto _ : state) {
    state.PauseTiming();
    proto::PushResponse p;
    Status s = client.Push(2, version, g.data(), size, 0, &p);
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    state.ResumeTiming();
    MasterClient::PullResult r;
    s = client.Pull(2, -1, theta.data(), size, &r);
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    version = r.version;
    bytes += 4.0 * size;
  }
  Record(state, "pull", bytes);
}

// Threads > 1: that many clients push at once, each as its own worker;
// the master receives one push while it applies another.
void BM_Push(benchmark::State& state) {
  const size_t size = state.range(0);
  MasterClient client = ClientOf(size);
  std::vector<float> g(size, 1e-3f);
  uint64_t version = 0;
  double bytes = 0;
  proto::DescribeResponse d;
  client.Describe(&d);
  version = d.version();
  CpuMeter cpu(state);
  for (auto _ : state) {
    cpu.StartOnce();
    proto::PushResponse r;
    Status s = client.Push(state.thread_index() + 1, version, g.data(), size, 0, &r);
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    version = r.version();
    bytes += 4.0 * size;
  }
  cpu.Report(state, bytes);
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
  CpuMeter cpu(state);  // the writer and the reader are both in this process
  for (auto _ : state) {
    cpu.StartOnce();
    size_t sent = 0;
    while (sent < data.size()) {
      ssize_t n = write(fd, data.data() + sent, std::min<size_t>(data.size() - sent, 4 << 20));
      if (n <= 0) break;
      sent += n;
    }
    bytes += static_cast<double>(sent);
  }
  cpu.Report(state, bytes);
  close(fd);
  reader.join();
  close(listener);
  Record(state, "tcp", bytes);
}

// A trainer's step round trip: PushPull of a LeNet-5 gradient with the
// next step's parameters in the reply, what a worker waits for between two
// batches. Microseconds per call; the second argument is how long the
// client computes (spins, untimed) before each call, as a trainer does for
// about 5 ms: back to back, the master's threads and both CPUs stay awake,
// which a trainer's calls do not see.
void BM_PushPull(benchmark::State& state) {
  const size_t size = state.range(0);
  const auto compute = std::chrono::microseconds(state.range(1));
  MasterClient client = ClientOf(size);
  std::vector<float> g(size, 1e-3f), theta(size);
  proto::DescribeResponse d;
  client.Describe(&d);
  uint64_t version = d.version();
  for (auto _ : state) {
    state.PauseTiming();
    const auto until = std::chrono::steady_clock::now() + compute;
    while (std::chrono::steady_clock::now() < until) {
    }
    state.ResumeTiming();
    MasterClient::PushPullResult r;
    Status s = client.PushPull(1, version, g.data(), size, 0, nullptr, proto::FLOAT32,
                               theta.data(), &r);
    if (!s.ok() || !r.pull_status.ok()) state.SkipWithError("push-pull failed");
    version = r.pull.version;
  }
}

// Pushes per second of a small model (mlp-sized) with concurrent clients.
void BM_PushesPerSecond(benchmark::State& state) {
  constexpr size_t kSize = kPushesPerSecondSize;
  thread_local std::unique_ptr<MasterClient> client;
  client = std::make_unique<MasterClient>(ClientOf(kSize));
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
BENCHMARK(BM_PullAfterPush)
    ->Arg(1 << 20)
    ->Arg(25 << 20)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_Push)->Arg(1 << 20)->Arg(25 << 20)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Push)->Arg(1 << 20)->Arg(25 << 20)->Threads(2)->Threads(4)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_PushPull)
    ->Args({kLenet5Size, 0})
    ->Args({kLenet5Size, 5000})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_PushesPerSecond)
    ->Threads(1)
    ->Threads(4)
    ->Threads(16)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Prints the ratio of each transfer's median bytes/s (over the
// repetitions) to plain TCP's. Repetitions run in random interleaved order
// (the defaults in main), so a burst of other work on the machine falls on
// TCP and gRPC repetitions alike.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      const bool median = r.run_type == Run::RT_Aggregate && r.aggregate_name == "median";
      if (!median) continue;
      std::string key = r.run_name.function_name + "/" + r.run_name.args;
      if (!r.run_name.threads.empty()) key += "/" + r.run_name.threads;
      auto rate = r.counters.find("bytes_per_second");
      if (rate != r.counters.end()) rates_[key] = rate->second.value;
      auto cpu = r.counters.find("cpu_ns_per_byte");
      if (cpu != r.counters.end()) cpu_ns_per_byte_[key] = cpu->second.value;
    }
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    std::printf("\nRatios of medians against plain TCP in this run (target >= 0.60):\n");
    for (const char* size : {"1048576", "26214400"}) {
      const double tcp = rates_["BM_PlainTcp/" + std::string(size)];
      // (benchmark, threads suffix, label); the threaded Push rows are the
      // master's push throughput with that many clients pushing at once.
      const struct {
        const char* op;
        const char* threads;
        const char* label;
      } rows[] = {{"BM_Pull", "", "Pull"},
                  {"BM_PullAfterPush", "", "PullAfterPush"},
                  {"BM_Push", "", "Push, 1 client"},
                  {"BM_Push", "/threads:2", "Push, 2 clients"},
                  {"BM_Push", "/threads:4", "Push, 4 clients"}};
      for (const auto& row : rows) {
        const double rate = rates_[std::string(row.op) + "/" + size + row.threads];
        const double ratio = tcp > 0 ? rate / tcp : 0;
        const bool has_target = std::string(row.op) != "BM_PullAfterPush";
        std::printf("  %s P=%s: %.2f GB/s vs TCP %.2f GB/s = %.2f %s\n", row.label, size,
                    rate / 1e9, tcp / 1e9, ratio,
                    !has_target ? "(no target)" : ratio >= 0.6 ? "PASS" : "BELOW TARGET");
      }
    }
    PrintCpuCeilings();
  }

 private:
  // CPU per byte of each row (both processes) against TCP's. A transfer
  // that needs c ns of CPU per byte cannot move more than cpus / c bytes
  // per ns on this machine, however well it overlaps its work: that
  // ceiling, as a ratio to TCP's rate, is printed beside the measured one.
  void PrintCpuCeilings() {
    const int cpus = AvailableCpus();
    std::printf("\nCPU per byte moved (client and master processes together), and the\n"
                "ratio to TCP that this CPU cost allows on the machine's %d CPUs:\n",
                cpus);
    for (const char* size : {"1048576", "26214400"}) {
      const std::string tcp_key = "BM_PlainTcp/" + std::string(size);
      const double tcp_cpu = cpu_ns_per_byte_[tcp_key];
      const double tcp_busy = tcp_cpu * rates_[tcp_key] / 1e9;
      std::printf("  TCP P=%s: %.3f ns/B, %.2f CPUs busy\n", size, tcp_cpu, tcp_busy);
      const struct {
        const char* key;
        const char* label;
      } rows[] = {{"BM_Pull", "Pull"},
                  {"BM_Push", "Push, 1 client"},
                  {"BM_Push/threads:2", "Push, 2 clients"},
                  {"BM_Push/threads:4", "Push, 4 clients"}};
      for (const auto& row : rows) {
        std::string key = row.key;
        const size_t slash = key.find('/');
        key = slash == std::string::npos ? key + "/" + size
                                         : key.substr(0, slash) + "/" + size + key.substr(slash);
        const double cpu = cpu_ns_per_byte_[key];
        const double tcp = rates_[tcp_key];
        if (cpu <= 0 || tcp <= 0) continue;
        const double ceiling = cpus * 1e9 / cpu / tcp;
        std::printf("  %s P=%s: %.3f ns/B = %.2fx TCP's: ceiling %.2f, measured %.2f\n",
                    row.label, size, cpu, cpu / tcp_cpu, ceiling, rates_[key] / tcp);
      }
    }
  }


  std::map<std::string, double> rates_;
  std::map<std::string, double> cpu_ns_per_byte_;
};

}  // namespace
}  // namespace gaptrain

int main(int argc, char** argv) {
  // Defaults first, so flags on the command line override them.
  std::vector<char*> args = {argv[0]};
  std::string repetitions = "--benchmark_repetitions=5";
  std::string interleave = "--benchmark_enable_random_interleaving=true";
  std::string min_time = "--benchmark_min_time=0.2";
  std::string display = "--benchmark_display_aggregates_only=true";
  for (std::string* flag : {&repetitions, &interleave, &min_time, &display}) {
    args.push_back(flag->data());
  }
  args.insert(args.end(), argv + 1, argv + argc);
  argc = static_cast<int>(args.size());
  argv = args.data();
  benchmark::Initialize(&argc, argv);
  gaptrain::UseTrainingHeapPolicy();  // as gaptrain-master and gaptrain-worker do
  bool in_process = false;
  for (int i = 1; i < argc; ++i) in_process = in_process || std::string(argv[i]) == "--in_process";
  if (in_process) {
    gaptrain::StartServersInProcess();
  } else {
    gaptrain::StartServerProcess();
  }
  gaptrain::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  return 0;
}
