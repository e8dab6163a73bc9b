// Simulator throughput: events (gradient + push + pull) per second for mlp
// and lenet5 with 16 virtual workers running Gap-Aware, and where the time
// goes: LibTorch's forward/backward, the update engine, and everything else
// (event queue, batching, evaluation). Target: the part outside LibTorch
// under 10%.
//
//   bazel run -c opt //bench:simulator_bench
// Reads MNIST from $GAPTRAIN_DATA_DIR/mnist (default ../shared/data/mnist
// relative to the directory `bazel run` was started from).

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli/simulator/simulation_spec.h"
#include "cli/simulator/simulator.h"
#include "services/api/training_job.h"
#include "services/learn/compute_threads.h"

namespace gaptrain {
namespace {

std::string DataDir() {
  if (const char* dir = std::getenv("GAPTRAIN_DATA_DIR")) return dir;
  std::string base;
  if (const char* cwd = std::getenv("BUILD_WORKING_DIRECTORY")) base = std::string(cwd) + "/";
  return base + "../shared/data";
}

const SimulationData& Data(const TrainingJob& job, const SimulationSpec& spec) {
  static SimulationData* data = [&] {
    auto* d = new SimulationData;
    Status s = LoadSimulationData(job, spec, d);
    if (!s.ok()) {
      std::fprintf(stderr, "simulator_bench: %s (set GAPTRAIN_DATA_DIR)\n", s.ToString().c_str());
      std::exit(1);
    }
    return d;
  }();
  return *data;
}

void BM_SimulatorEvents(benchmark::State& state, const char* model) {
  SetComputeThreads(1);
  TrainingJob job;
  const std::string yaml = std::string(R"(
apiVersion: gaptrain.io/v1alpha1
kind: TrainingJob
metadata: {name: bench}
spec:
  model: {builtin: )") + model + R"(}
  data: {format: mnist-idx, path: )" + DataDir() + R"(/mnist}
  training:
    batchSize: 128
    maxUpdates: 200
    optimizer: {learningRate: 0.05, momentum: 0.9, decay: {type: none}}
  workers: {replicas: 16}
  simulation: {evalEveryEpochs: 1000, evalSamples: 500}
)";
  Status s = ParseTrainingJob(yaml, "bench.yaml", &job);
  SimulationSpec spec;
  if (s.ok()) s = ParseSimulationSpec(job, &spec);
  if (!s.ok()) {
    state.SkipWithError(s.ToString().c_str());
    return;
  }
  const SimulationData& data = Data(job, spec);
  SimulationRun run;
  run.rule = "gap-aware";
  run.workers = 16;
  run.learning_rate = 0.05;
  run.momentum = 0.9;

  double gradient = 0, update = 0, eval = 0, total = 0;
  uint64_t events = 0;
  for (auto _ : state) {
    RunResult result;
    s = RunSimulation(job, spec, run, data, {}, &result);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
    gradient += result.seconds_gradient;
    update += result.seconds_update;
    eval += result.seconds_eval;
    total += result.seconds_total;
    events += result.pushes;
  }
  state.counters["events_per_s"] = events / total;
  state.counters["gradient_pct"] = 100 * gradient / total;
  state.counters["update_pct"] = 100 * update / total;
  state.counters["eval_pct"] = 100 * eval / total;
  // Everything outside LibTorch's forward/backward, evaluation excluded:
  // the update engine plus the simulator's own bookkeeping.
  state.counters["outside_libtorch_pct"] = 100 * (total - gradient - eval) / (total - eval);
}

BENCHMARK_CAPTURE(BM_SimulatorEvents, mlp, "mlp")->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(BM_SimulatorEvents, lenet5, "lenet5")->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
}  // namespace gaptrain

BENCHMARK_MAIN();
