// update_rules_bench: how fast the master applies one push, for every update
// rule, in nanoseconds per parameter per update and in effective memory
// bandwidth, next to a STREAM triad (the machine's streaming bandwidth) and
// next to the Gap-Aware update written with LibTorch tensor ops.
//
//   bazel build -c opt //bench:update_rules_bench
//   bazel-bin/bench/update_rules_bench --benchmark_min_time=0.2 --benchmark_repetitions=3
//
// (about 1 minute; the summary keeps the best repetition of each benchmark).
//
// Each rule is set up as UpdateEngine does it (CreateUpdateRule, InitState,
// AddWorker, the snapshot buffer Join adds) and timed through
// UpdateRule::Apply, without the engine's validation scans, so the numbers
// are the rules' fused kernels alone.
//
// Bytes per parameter count what a rule must move: each buffer it only reads
// as 4 B (fp32) or 2 B (bf16), each buffer it reads and writes back as 8 B or
// 4 B. The triad a[i] = b[i] + s*c[i] is counted the STREAM way, 12 B per
// element, ignoring the write-allocate read of a[]. GA is compared with a
// triad over the same bytes (P * 32 / 12 elements), so both are in or both
// are out of the last-level cache, whose size (as the kernel describes it,
// bench/cache_size.h) is printed with where each size stands against it.
// docs/performance.md records and explains the results.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>


#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/cache_size.h"
#include "services/base/heap_policy.h"
#include "services/engine/apply_stats.h"
#include "services/engine/flat_buffer.h"
#include "services/engine/gradient_view.h"
#include "services/engine/parameter_layout.h"
#include "services/engine/parameter_store.h"
#include "services/engine/rules/kernel_util.h"
#include "services/engine/rules/rule_config.h"
#include "services/engine/rules/update_rule.h"
#include "services/numeric/sliced_bytes.h"

namespace gaptrain {
namespace {

// Momentum and weight decay of the papers' ResNet-20 / CIFAR-10 runs.
constexpr float kMomentum = 0.9f;
constexpr float kWeightDecay = 1e-4f;
constexpr double kLearningRate = 0.05;
constexpr double kGapBeta = 0.999;
constexpr double kGapEpsilon = 1e-8;

// Every async push is 3 versions stale, from one of 4 live workers.
constexpr uint64_t kStaleness = 3;
constexpr size_t kLiveWorkers = 4;
constexpr uint64_t kMasterVersion = 1000;
constexpr WorkerId kWorker = 7;

constexpr size_t kSizes[] = {1000000, 25000000};

// Deterministic values in [lo, hi) (xorshift64), never NaN or Inf.
void FillUniform(float* out, size_t n, float lo, float hi, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
  for (size_t i = 0; i < n; ++i) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    const float u = static_cast<float>(s >> 40) * (1.0f / 16777216.0f);
    out[i] = lo + (hi - lo) * u;
  }
}

// Four equal weight matrices when P allows it (the kernels are cut at tensor
// boundaries, as for a real model), else one tensor.
ParameterLayout MakeLayout(size_t p) {
  ParameterLayout layout;
  if (p % 4000 == 0) {
    for (int i = 0; i < 4; ++i) {
      layout.Add("layer" + std::to_string(i) + ".weight",
                 {static_cast<int64_t>(p / 4000), 1000});
    }
  } else {
    layout.Add("weight", {static_cast<int64_t>(p)});
  }
  return layout;
}

std::string SizeName(size_t p) {
  if (p % 1000000 == 0) return std::to_string(p / 1000000) + "M";
  return std::to_string(p);
}

// ---------------------------------------------------------------------------
// What was registered, so the summary can find each run again.

struct BenchInfo {
  std::string row;  // summary row, e.g. "gap-aware / snapshot fp32"
  size_t p = 0;
  double bytes_per_param = 0.0;
};

std::map<std::string, BenchInfo>& Registry() {
  static auto* registry = new std::map<std::string, BenchInfo>();
  return *registry;
}

// Summary rows in registration order, with their bytes per parameter.
std::vector<std::pair<std::string, double>>& RowOrder() {
  static auto* rows = new std::vector<std::pair<std::string, double>>();
  return *rows;
}

void NoteRow(const std::string& row, double bytes_per_param) {
  for (const auto& r : RowOrder()) {
    if (r.first == row) return;
  }
  RowOrder().emplace_back(row, bytes_per_param);
}

// bytes_per_param: as counted above. ns_per_param: wall time per update / P.
// GB/s: bytes_per_param * P per update / wall time (1 GB = 1e9 B).
void SetCounters(benchmark::State& state, size_t p, double bytes_per_param) {
  using benchmark::Counter;
  state.counters["bytes_per_param"] = Counter(bytes_per_param);
  state.counters["ns_per_param"] =
      Counter(static_cast<double>(p) * 1e-9,
              static_cast<Counter::Flags>(Counter::kIsIterationInvariantRate | Counter::kInvert));
  state.counters["GB/s"] = Counter(static_cast<double>(p) * bytes_per_param * 1e-9,
                                   Counter::kIsIterationInvariantRate);
}

// ---------------------------------------------------------------------------
// The rules.

struct RuleVariant {
  std::string rule;     // the manifest's name
  std::string variant;  // which configuration of it
  RuleConfig config;
  DType copy_dtype = DType::kFloat32;  // θ⁽ⁱ⁾ when config.NeedsWorkerCopy()
  double bytes_per_param = 0.0;
  // The gradient as the master holds a push: fp32 wire bytes in received
  // pieces (GradientView decodes them block by block), not one array.
  bool wire_gradient = false;
};

RuleConfig BaseConfig(RuleKind kind) {
  RuleConfig c;
  c.kind = kind;
  c.momentum = kMomentum;
  c.weight_decay = kWeightDecay;
  c.gap_beta = kGapBeta;
  c.gap_epsilon = kGapEpsilon;
  return c;
}

std::vector<RuleVariant> AllVariants() {
  std::vector<RuleVariant> out;
  auto add = [&](const char* rule, const char* variant, RuleConfig c, DType copy,
                 double bytes) { out.push_back(RuleVariant{rule, variant, c, copy, bytes}); };
  const DType f32 = DType::kFloat32;
  const DType bf16 = DType::kBfloat16;
  // The gap-aware rules are measured with the workers' snapshot copies in
  // both precisions a job may choose (GapPrecision).
  auto add_snapshots = [&](const char* rule, RuleKind kind, double fp32_bytes,
                           double bf16_bytes) {
    RuleConfig c = BaseConfig(kind);
    c.gap_precision = GapPrecision::kFloat32;
    add(rule, "snapshot fp32", c, f32, fp32_bytes);
    c.gap_precision = GapPrecision::kBfloat16;
    add(rule, "snapshot bf16", c, bf16, bf16_bytes);
  };

  // ASGD. plain: g(4) + θ(8). heavy ball / Nesterov: + v(8).
  RuleConfig plain = BaseConfig(RuleKind::kAsgd);
  plain.momentum = 0.0f;
  add("asgd", "plain (momentum 0)", plain, f32, 12);
  add("asgd", "heavy-ball", BaseConfig(RuleKind::kAsgd), f32, 20);
  RuleConfig nesterov = BaseConfig(RuleKind::kAsgd);
  nesterov.nesterov = true;
  add("asgd", "nesterov", nesterov, f32, 20);

  // SA: the ASGD heavy-ball pass with a scaled gradient: g(4) + θ(8) + v(8).
  add("staleness-aware", "heavy-ball", BaseConfig(RuleKind::kStalenessAware), f32, 20);

  // GA: g(4) + copy(4|2) + θ(8) + v(8) + r(8).
  add_snapshots("gap-aware", RuleKind::kGapAware, 32, 30);

  // DANA-Zero: g(4) + θ(8) + S(8) + v⁽ⁱ⁾(8).
  add("dana-zero", "", BaseConfig(RuleKind::kDanaZero), f32, 28);
  // DANA-Slim: u(4) + x(8).
  add("dana-slim", "", BaseConfig(RuleKind::kDanaSlim), f32, 12);

  // GA + DANA: g(4) + copy(4|2) + θ(8) + v⁽ⁱ⁾(8) + S(8) + r(8).
  add_snapshots("gap-aware-dana", RuleKind::kGapAwareDana, 40, 38);

  // DC-ASGD: g(4) + copy(4) + θ(8) + v(8); adaptive: + MeanSquare(8).
  RuleConfig dc = BaseConfig(RuleKind::kDcAsgd);
  add("dc-asgd", "constant, fp32 copy", dc, f32, 24);
  dc.dc_adaptive = true;
  add("dc-asgd", "adaptive, fp32 copy", dc, f32, 32);

  // Sync, one live worker: every push completes a step on its own gradient,
  // so the (zero) sum is not touched: g(4) + θ(8) + v(8).
  add("sync", "1 push per step", BaseConfig(RuleKind::kSync), f32, 20);
  return out;
}

bool UsesGap(const RuleConfig& c) {
  return c.kind == RuleKind::kGapAware || c.kind == RuleKind::kGapAwareDana;
}

void BM_UpdateRule(benchmark::State& state, RuleVariant v, size_t p) {
  Status valid = v.config.Validate();
  if (!valid.ok()) {
    state.SkipWithError(valid.ToString().c_str());
    return;
  }
  // As UpdateEngine::Create and Join set it up.
  ParameterStore store(MakeLayout(p));
  FillUniform(store.params(), p, -0.1f, 0.1f, 1);
  std::unique_ptr<UpdateRule> rule = CreateUpdateRule(v.config);
  rule->InitState(&store);
  rule->AddWorker(kWorker, &store);
  store.set_version(kMasterVersion);

  FlatBuffer gradient(DType::kFloat32, p);
  FillUniform(gradient.f32(), p, -0.01f, 0.01f, 2);

  // Pieces of 64 KiB + 3 bytes, so values straddle pieces and start at
  // every alignment, as in gRPC's receive buffers.
  SlicedBytes wire;
  const uint8_t* bytes = static_cast<const uint8_t*>(gradient.data());
  for (size_t at = 0; at < gradient.bytes(); at += (64 << 10) + 3) {
    wire.Append(bytes + at, std::min<size_t>((64 << 10) + 3, gradient.bytes() - at));
  }

  PushContext push;
  push.worker = kWorker;
  push.gradient = v.wire_gradient ? GradientView(&wire, DType::kFloat32, p)
                                  : GradientView(gradient.f32(), p);
  push.learning_rate = kLearningRate;
  push.staleness = kStaleness;
  push.base_version = kMasterVersion - kStaleness;
  push.live_workers = kLiveWorkers;
  if (v.config.kind == RuleKind::kSync) {
    // A sync gradient is for the current step (τ = 0; the engine would
    // discard an older one); one live worker makes every push a step.
    push.staleness = 0;
    push.base_version = store.version();
    push.live_workers = 1;
  }
  if (v.config.NeedsWorkerCopy()) {
    // The snapshot Join adds and Pull fills: θ as sent to the worker, which
    // the master has since moved away from a little.
    FlatBuffer* copy = store.AddBuffer(WorkerStateName(kWorker, kWorkerCopy), v.copy_dtype);
    std::vector<float> sent(p);
    FillUniform(sent.data(), p, -1e-3f, 1e-3f, 3);
    const float* theta = store.params();
    for (size_t j = 0; j < p; ++j) sent[j] += theta[j];
    copy->CopyFrom(sent.data());
    push.copy.dtype = copy->dtype();
    push.copy.data = copy->data();
  }

  // Warm-up: touches every page, and feeds r once (k = 1) so the Gap rules
  // run with the penalty on.
  ApplyStats stats;
  rule->Apply(push, &store, &stats);
  if (stats.outcome != ApplyStats::Outcome::kApplied) {
    state.SkipWithError("warm-up push was not applied");
    return;
  }
  if (UsesGap(v.config) && !(store.scalar(kGapFeedsScalar) > 0)) {
    state.SkipWithError("Gap penalty still disabled (k = 0) after warm-up");
    return;
  }

  for (auto _ : state) {
    rule->Apply(push, &store, &stats);
    benchmark::ClobberMemory();
  }

  if (stats.outcome != ApplyStats::Outcome::kApplied) {
    state.SkipWithError("a timed push was not applied");
    return;
  }
  const float* theta = store.params();
  if (!std::isfinite(theta[0]) || !std::isfinite(theta[p / 2]) || !std::isfinite(theta[p - 1])) {
    state.SkipWithError("parameters became non-finite");
    return;
  }
  if (UsesGap(v.config)) {
    char label[96];
    std::snprintf(label, sizeof label, "k=%.0f mean G=%.2f", store.scalar(kGapFeedsScalar),
                  stats.gap.gap_mean);
    state.SetLabel(label);
  }
  SetCounters(state, p, v.bytes_per_param);
}

// ---------------------------------------------------------------------------
// STREAM triad: a[i] = b[i] + s*c[i], 12 B per element as STREAM counts it
// (the write-allocate read of a[] is real traffic but not counted).

__attribute__((noinline)) void Triad(float* __restrict a, const float* __restrict b,
                                     const float* __restrict c, float s, size_t n) {
  for (size_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}

void BM_Triad(benchmark::State& state, size_t p) {
  FlatBuffer a(DType::kFloat32, p), b(DType::kFloat32, p), c(DType::kFloat32, p);
  FillUniform(b.f32(), p, -1.0f, 1.0f, 4);
  FillUniform(c.f32(), p, -1.0f, 1.0f, 5);
  Triad(a.f32(), b.f32(), c.f32(), 3.0f, p);
  for (auto _ : state) {
    Triad(a.f32(), b.f32(), c.f32(), 3.0f, p);
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(a.f32()[p / 2]);
  SetCounters(state, p, 12);
}

// ---------------------------------------------------------------------------
// Gap-Aware written with LibTorch tensor ops, as a PyTorch user would.

struct TorchGa {
  at::Tensor theta, v, r, copy, g;
  int64_t k = 0;  // r feeds so far

  // One GA step (heavy ball, weight decay penalised), the spec's formulas.
  void Step() {
    const double eta_max = kLearningRate;
    const double lr = kLearningRate;
    const double wd = kWeightDecay;
    const double mom = kMomentum;
    const double beta = kGapBeta;
    const double eps = kGapEpsilon;
    at::Tensor d;
    if (k == 0) {  // r is still 0: no penalty (G = 1)
      d = g + wd * theta;
    } else {
      const double bias = 1.0 - std::pow(beta, static_cast<double>(k));
      at::Tensor delta = theta - copy;
      at::Tensor C = eta_max * ((r / bias).sqrt() + eps);
      at::Tensor G = 1 + delta.abs() / C;
      d = (g + wd * theta) / G;
    }
    v.mul_(mom).add_(d);
    theta.sub_(lr * v);
    r.mul_(beta).add_((1 - beta) * v * v);
    ++k;
  }
};

at::Tensor TensorFrom(const float* values, size_t p) {
  at::Tensor t = at::empty({static_cast<int64_t>(p)}, at::kFloat);
  std::copy(values, values + p, t.data_ptr<float>());
  return t;
}

TorchGa MakeTorchGa(size_t p) {
  std::vector<float> buf(p);
  TorchGa s;
  FillUniform(buf.data(), p, -0.1f, 0.1f, 1);
  s.theta = TensorFrom(buf.data(), p);
  std::vector<float> noise(p);
  FillUniform(noise.data(), p, -1e-3f, 1e-3f, 3);
  for (size_t j = 0; j < p; ++j) buf[j] += noise[j];
  s.copy = TensorFrom(buf.data(), p);
  FillUniform(buf.data(), p, -0.01f, 0.01f, 2);
  s.g = TensorFrom(buf.data(), p);
  s.v = at::zeros({static_cast<int64_t>(p)}, at::kFloat);
  s.r = at::zeros({static_cast<int64_t>(p)}, at::kFloat);
  return s;
}

void BM_TorchGa(benchmark::State& state, size_t p) {
  TorchGa s = MakeTorchGa(p);
  s.Step();  // k = 0 -> 1, so the timed steps carry the penalty
  for (auto _ : state) {
    s.Step();
    benchmark::ClobberMemory();
  }
  if (!std::isfinite(s.theta.data_ptr<float>()[p / 2])) {
    state.SkipWithError("parameters became non-finite");
    return;
  }
  // Counted as the same 32 B/param the algorithm needs, so GB/s compares
  // like with like; the temporaries move several times more.
  SetCounters(state, p, 32);
}

// The two GA implementations compute the same thing: three steps from the
// same state, then compare θ, v and r.
void CheckTorchMatchesFused() {
  const size_t p = 32768;
  RuleConfig c = BaseConfig(RuleKind::kGapAware);
  ParameterStore store(MakeLayout(p));
  FillUniform(store.params(), p, -0.1f, 0.1f, 1);
  std::unique_ptr<UpdateRule> rule = CreateUpdateRule(c);
  rule->InitState(&store);
  rule->AddWorker(kWorker, &store);
  FlatBuffer* copy = store.AddBuffer(WorkerStateName(kWorker, kWorkerCopy), DType::kFloat32);
  std::vector<float> sent(p);
  FillUniform(sent.data(), p, -1e-3f, 1e-3f, 3);
  for (size_t j = 0; j < p; ++j) sent[j] += store.params()[j];
  copy->CopyFrom(sent.data());
  FlatBuffer gradient(DType::kFloat32, p);
  FillUniform(gradient.f32(), p, -0.01f, 0.01f, 2);

  PushContext push;
  push.worker = kWorker;
  push.gradient = GradientView(gradient.f32(), p);
  push.copy.dtype = DType::kFloat32;
  push.copy.data = copy->data();
  push.learning_rate = kLearningRate;
  push.staleness = kStaleness;
  push.live_workers = kLiveWorkers;

  TorchGa t = MakeTorchGa(p);
  ApplyStats stats;
  for (int i = 0; i < 3; ++i) {
    rule->Apply(push, &store, &stats);
    t.Step();
  }
  // max |fused - torch| / max |torch|: elements near zero make an
  // element-wise relative error meaningless.
  auto max_rel = [&](const float* fused, const at::Tensor& ref) {
    const float* r = ref.data_ptr<float>();
    double worst = 0.0, scale = 1e-30;
    for (size_t j = 0; j < p; ++j) {
      worst = std::max(worst, std::fabs(static_cast<double>(fused[j]) - r[j]));
      scale = std::max(scale, std::fabs(static_cast<double>(r[j])));
    }
    return worst / scale;
  };
  const double d_theta = max_rel(store.params(), t.theta);
  const double d_v = max_rel(store.buffer(kMomentumBuffer)->f32(), t.v);
  const double d_r = max_rel(store.buffer(kStepSquareBuffer)->f32(), t.r);
  const bool ok = d_theta < 1e-5 && d_v < 1e-4 && d_r < 1e-4;
  std::printf(
      "check: fused GA vs LibTorch-ops GA after 3 steps (P=%zu, mean G=%.2f): max |difference| / "
      "max |value|: theta %.1e, v %.1e, r %.1e: %s\n",
      p, stats.gap.gap_mean, d_theta, d_v, d_r, ok ? "same update" : "MISMATCH");
}

// ---------------------------------------------------------------------------
// Registration, the reporter that keeps the results, and the summary.

// `in_table`: a row of the summary table (its columns are kSizes).
void Register(const std::string& name, const std::string& row, size_t p, double bytes,
              benchmark::internal::Benchmark* b, bool in_table = true) {
  Registry()[name] = BenchInfo{row, p, bytes};
  if (in_table) NoteRow(row, bytes);
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}

std::string RowName(const RuleVariant& v) {
  return v.variant.empty() ? v.rule : v.rule + " / " + v.variant;
}

// "dc-asgd / constant, fp32 copy" at 1M -> "dc-asgd/constant_fp32_copy/P:1M".
std::string BenchName(const std::string& row, size_t p) {
  std::string name;
  for (size_t i = 0; i < row.size(); ++i) {
    if (row.compare(i, 3, " / ") == 0) {
      name += '/';
      i += 2;
    } else if (row[i] == ' ') {
      name += '_';
    } else if (row[i] != ',' && row[i] != '(' && row[i] != ')') {
      name += row[i];
    }
  }
  return name + "/P:" + SizeName(p);
}

constexpr char kTriadRow[] = "STREAM triad a=b+s*c";
// The triad over as many bytes as GA (snapshot fp32, 32 B/param) moves at P.
constexpr char kTriadGaBytesRow[] = "STREAM triad over GA's bytes";
constexpr double kGaBytesPerParam = 32;
size_t TriadElementsForGa(size_t p) { return static_cast<size_t>(p * kGaBytesPerParam / 12); }

constexpr char kTorchRow[] = "gap-aware / LibTorch tensor ops";
constexpr char kGaRow[] = "gap-aware / snapshot fp32";
constexpr char kGaThreadsRow[] = "gap-aware / snapshot fp32, 2 threads";
constexpr char kAsgdPlainRow[] = "asgd / plain (momentum 0)";
constexpr char kWireSuffix[] = ", gradient in wire pieces";

void RegisterAll() {
  const std::vector<RuleVariant> variants = AllVariants();
  for (size_t p : kSizes) {
    const std::string triad = BenchName("stream-triad", p);
    Register(triad, kTriadRow, p, 12,
             benchmark::RegisterBenchmark(triad.c_str(), BM_Triad, p));
    const size_t pt = TriadElementsForGa(p);
    const std::string matched = BenchName("stream-triad-ga-bytes", pt);
    Register(matched, kTriadGaBytesRow, pt, 12,
             benchmark::RegisterBenchmark(matched.c_str(), BM_Triad, pt), /*in_table=*/false);
    for (const RuleVariant& v : variants) {
      const std::string row = RowName(v);
      const std::string name = BenchName(row, p);
      Register(name, row, p, v.bytes_per_param,
               benchmark::RegisterBenchmark(name.c_str(), BM_UpdateRule, v, p));
      if (row == kGaRow || row == kAsgdPlainRow) {
        RuleVariant wire = v;
        wire.wire_gradient = true;
        const std::string wrow = row + kWireSuffix;
        const std::string wname = BenchName(wrow, p);
        Register(wname, wrow, p, v.bytes_per_param,
                 benchmark::RegisterBenchmark(wname.c_str(), BM_UpdateRule, wire, p));
      }
      if (row == kGaRow && p >= 25000000) {
        RuleVariant threaded = v;
        threaded.config.num_threads = 2;
        const std::string tname = BenchName(kGaThreadsRow, p);
        Register(tname, kGaThreadsRow, p, v.bytes_per_param,
                 benchmark::RegisterBenchmark(tname.c_str(), BM_UpdateRule, threaded, p));
      }
    }
    const std::string torch = BenchName(kTorchRow, p);
    Register(torch, kTorchRow, p, 32,
             benchmark::RegisterBenchmark(torch.c_str(), BM_TorchGa, p));
  }
}

struct Result {
  double seconds_per_update = 0.0;  // best over repetitions
  double bytes_per_param = 0.0;
};

// Console output as usual (counters in columns), and the per-update wall
// time of every successful run kept for the summary.
class CollectingReporter : public benchmark::ConsoleReporter {
 public:
  CollectingReporter() : benchmark::ConsoleReporter(benchmark::ConsoleReporter::OO_Tabular) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.error_occurred || run.iterations == 0) continue;
      // Single runs; with --benchmark_display_aggregates_only only the
      // aggregates arrive, and the median stands in for them.
      const bool single = run.run_type == Run::RT_Iteration;
      if (!single && run.aggregate_name != "median") continue;
      auto it = Registry().find(run.run_name.function_name);
      if (it == Registry().end()) continue;
      const double s = run.real_accumulated_time / static_cast<double>(run.iterations);
      auto& results = single ? results_ : medians_;
      auto key = std::make_pair(it->second.row, it->second.p);
      auto found = results.find(key);
      if (found == results.end() || s < found->second.seconds_per_update) {
        results[key] = Result{s, it->second.bytes_per_param};
      }
    }
    // The counters already hold their final values (rates divided by the
    // wall time); drop the rate flags for display so the console prints the
    // plain numbers ("0.54" ns_per_param) instead of appending "s" or "/s".
    std::vector<Run> display = runs;
    for (Run& run : display) {
      for (auto& [name, counter] : run.counters) counter.flags = benchmark::Counter::kDefaults;
    }
    ConsoleReporter::ReportRuns(display);
  }

  const Result* Find(const std::string& row, size_t p) const {
    auto key = std::make_pair(row, p);
    auto it = results_.find(key);
    if (it != results_.end()) return &it->second;
    it = medians_.find(key);
    return it == medians_.end() ? nullptr : &it->second;
  }

 private:
  std::map<std::pair<std::string, size_t>, Result> results_;  // best single run
  std::map<std::pair<std::string, size_t>, Result> medians_;  // median aggregate
};

void PrintSummary(const CollectingReporter& rep) {
  std::printf(
      "\nSummary (wall time per update, best of the repetitions of each benchmark; GB/s = "
      "bytes/param / ns/param)\n\n");
  std::printf("| rule | bytes/param |");
  for (size_t p : kSizes) {
    std::printf(" ns/param P=%s | GB/s P=%s |", SizeName(p).c_str(), SizeName(p).c_str());
  }
  std::printf("\n|---|---:|");
  for (size_t i = 0; i < sizeof(kSizes) / sizeof(kSizes[0]); ++i) std::printf("---:|---:|");
  std::printf("\n");
  for (const auto& [row, bytes] : RowOrder()) {
    std::printf("| %s | %.0f |", row.c_str(), bytes);
    for (size_t p : kSizes) {
      const Result* r = rep.Find(row, p);
      if (r == nullptr) {
        std::printf(" - | - |");
      } else {
        const double ns = r->seconds_per_update * 1e9 / static_cast<double>(p);
        const double gbs = r->bytes_per_param / ns;  // B/ns = GB/s
        std::printf(" %.3f | %.1f |", ns, gbs);
      }
    }
    std::printf("\n");
  }

  const CacheSize cache = LastLevelCache();
  const long llc = cache.bytes;
  if (llc > 0) {
    std::printf("\nRatios (this run; last-level cache %.0f MiB: %s)\n", llc / 1048576.0,
                cache.source.c_str());
  } else {
    std::printf("\nRatios (this run; last-level cache size unknown)\n");
  }
  for (size_t p : kSizes) {
    const Result* ga = rep.Find(kGaRow, p);
    const Result* triad = rep.Find(kTriadGaBytesRow, TriadElementsForGa(p));
    const Result* torch = rep.Find(kTorchRow, p);
    const std::string size = SizeName(p);
    if (ga != nullptr && triad != nullptr) {
      const double ga_gbs = ga->bytes_per_param * p / ga->seconds_per_update / 1e9;
      const double triad_gbs =
          triad->bytes_per_param * TriadElementsForGa(p) / triad->seconds_per_update / 1e9;
      const double ratio = ga_gbs / triad_gbs;
      const double bytes = kGaBytesPerParam * p;
      std::printf(
          "ratio ga_fp32/triad bandwidth at P=%s: %.2f (GA %.1f GB/s, triad %.1f GB/s over the "
          "same %.0f MB, %s; target >= 1.0): %s\n",
          size.c_str(), ratio, ga_gbs, triad_gbs, bytes / 1e6,
          CacheFit(bytes, llc),
          ratio >= 1.0 ? "PASS" : "BELOW TARGET");
    } else {
      std::printf("ratio ga_fp32/triad bandwidth at P=%s: n/a (not run)\n", size.c_str());
    }
    if (ga != nullptr && torch != nullptr) {
      const double speedup = torch->seconds_per_update / ga->seconds_per_update;
      std::printf(
          "speedup fused GA vs LibTorch ops at P=%s: %.1f (LibTorch %.2f ms, fused %.2f ms per "
          "update; target >= 10): %s\n",
          size.c_str(), speedup, torch->seconds_per_update * 1e3, ga->seconds_per_update * 1e3,
          speedup >= 10.0 ? "PASS" : "BELOW TARGET");
    } else {
      std::printf("speedup fused GA vs LibTorch ops at P=%s: n/a (not run)\n", size.c_str());
    }
    const Result* threads = rep.Find(kGaThreadsRow, p);
    if (ga != nullptr && threads != nullptr) {
      std::printf("GA fp32 with 2 threads vs 1 thread at P=%s: %.2fx\n", size.c_str(),
                  ga->seconds_per_update / threads->seconds_per_update);
    }
  }
}

// Echo versus snapshot, from the store's own accounting: the master memory
// one more worker adds with gapSource snapshot (fp32 or bf16), against the
// bytes an echo adds to every push instead.
void PrintEchoVersusSnapshot() {
  const size_t p = 25000000;
  const size_t workers[] = {16, 128};
  std::printf("\nEcho versus snapshot, gap-aware at P=%s (ParameterStore::MemoryBytes)\n",
              SizeName(p).c_str());
  for (GapPrecision precision : {GapPrecision::kFloat32, GapPrecision::kBfloat16}) {
    RuleConfig c = BaseConfig(RuleKind::kGapAware);
    c.gap_precision = precision;
    const DType dtype =
        precision == GapPrecision::kFloat32 ? DType::kFloat32 : DType::kBfloat16;
    ParameterStore store(MakeLayout(p));
    std::unique_ptr<UpdateRule> rule = CreateUpdateRule(c);
    rule->InitState(&store);
    const double base = static_cast<double>(store.MemoryBytes());
    for (WorkerId w = 1; w <= 2; ++w) {  // what UpdateEngine::Join adds
      rule->AddWorker(w, &store);
      store.AddBuffer(WorkerStateName(w, kWorkerCopy), dtype);
    }
    const double per_worker = (static_cast<double>(store.MemoryBytes()) - base) / 2.0;
    const double gradient = 4.0 * static_cast<double>(p);
    const double echo = static_cast<double>(DTypeSize(dtype)) * static_cast<double>(p);
    std::printf("  %s: snapshot %.0f MB master memory per worker (theta, v, r: %.0f MB)",
                DTypeName(dtype), per_worker / 1e6, base / 1e6);
    for (size_t n : workers) {
      std::printf("; N=%zu: +%.1f GB (master %.1f GB)", n, n * per_worker / 1e9,
                  (base + n * per_worker) / 1e9);
    }
    std::printf("\n  %s: echo 0 B master memory, +%.0f MB upload per push (%.0f MB gradient "
                "-> %.0f MB, x%.2f)\n",
                DTypeName(dtype), echo / 1e6, gradient / 1e6, (gradient + echo) / 1e6,
                (gradient + echo) / gradient);
  }
}

}  // namespace
}  // namespace gaptrain

int main(int argc, char** argv) {
  // LibTorch's row reuses freed heap as every LibTorch process of ours does.
  gaptrain::UseTrainingHeapPolicy();
  // One thread for LibTorch's ops, like the fused kernels (num_threads = 1).
  at::set_num_threads(1);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  gaptrain::CheckTorchMatchesFused();
  gaptrain::RegisterAll();
  gaptrain::CollectingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  gaptrain::PrintSummary(reporter);
  gaptrain::PrintEchoVersusSnapshot();
  benchmark::Shutdown();
  return 0;
}
