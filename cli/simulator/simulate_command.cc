#include "cli/simulator/simulate_command.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "cli/simulator/report.h"
#include "cli/simulator/simulation_spec.h"
#include "cli/simulator/simulator.h"
#include "cli/simulator/sweep.h"
#include "services/api/training_job.h"

namespace gaptrain {
namespace {

constexpr char kUsage[] =
    "usage: gaptrain simulate -f JOB.yaml [--output DIR] [--parallel K]\n"
    "       gaptrain simulate --replot DIR   (redraw DIR's summary and plots from its results.csv)\n"
    "  Runs spec.simulation of the TrainingJob: N virtual workers per run,\n"
    "  real gradients, the real update rules. Writes DIR/results.csv,\n"
    "  DIR/summary.md and DIR/accuracy_N<n>.png.\n";

int Fail(const std::string& message, int code) {
  std::fprintf(stderr, "gaptrain simulate: %s\n", message.c_str());
  return code;
}

bool ParseCount(const std::string& text, uint32_t* out) {
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < 1 || v > 1024) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

}  // namespace

int SimulateCommand(const std::vector<std::string>& args) {
  std::string job_path, output, replot;
  uint32_t parallel = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    bool has_value = i + 1 < args.size();
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if ((a == "-f" || a == "--file") && has_value) {
      job_path = args[++i];
    } else if (a == "--replot" && has_value) {
      replot = args[++i];
    } else if (a == "--output" && has_value) {
      output = args[++i];
    } else if (a == "--parallel" && has_value) {
      if (!ParseCount(args[++i], &parallel)) {
        return Fail("--parallel: must be an integer in [1, 1024], got '" + args[i] + "'", 2);
      }
    } else {
      return Fail("unexpected argument '" + a + "'\n" + kUsage, 2);
    }
  }
  if (!replot.empty()) {
    std::vector<RunResult> results;
    Status s = ReadResultsCsv(replot + "/results.csv", &results);
    if (!s.ok()) return Fail(s.message(), 2);
    s = PlotResults(replot, results);
    if (!s.ok()) return Fail(s.message(), 1);
    const std::string table = SummaryTable(results);
    std::printf("%s\nRedrew %s/accuracy_N*.png from %zu runs\n", table.c_str(), replot.c_str(),
                results.size());
    return 0;
  }
  if (job_path.empty()) return Fail(std::string("missing -f JOB.yaml\n") + kUsage, 2);

  TrainingJob job;
  Status s = LoadTrainingJob(job_path, &job);
  if (!s.ok()) return Fail(s.message(), 2);
  SimulationSpec spec;
  s = ParseSimulationSpec(job, &spec);
  if (!s.ok()) return Fail(job_path + ": " + s.message(), 2);
  if (!output.empty()) spec.output = output;
  if (parallel > 0) spec.parallel = parallel;

  SimulationData data;
  s = LoadSimulationData(job, spec, &data);
  if (!s.ok()) return Fail(s.message(), 1);

  std::vector<SimulationRun> runs = ExpandSweep(spec);
  std::fprintf(stderr, "gaptrain simulate: %zu runs of %s (%zu training samples)\n", runs.size(),
               job.name.c_str(), data.train.size());
  auto start = std::chrono::steady_clock::now();
  std::vector<RunResult> results;
  s = RunSweep(job, spec, data, stderr, &results);
  if (!s.ok()) return Fail(s.ToString(), 1);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  s = PlotResults(spec.output, results);  // also creates the directory
  if (!s.ok()) std::fprintf(stderr, "gaptrain simulate: no plots: %s\n", s.message().c_str());
  Status csv = WriteResultsCsv(spec.output + "/results.csv", results);
  if (!csv.ok()) return Fail(csv.message(), 1);
  std::string table = SummaryTable(results);
  std::ofstream(spec.output + "/summary.md")
      << "# " << job.name << ": final test accuracy (%)\n\n" << table;

  std::printf("\nFinal test accuracy (%%, mean ± std over seeds):\n\n%s\n", table.c_str());
  std::printf("%zu runs in %.0f s. Results: %s/results.csv, %s/summary.md%s\n", runs.size(),
              seconds, spec.output.c_str(), spec.output.c_str(),
              s.ok() ? (", plots " + spec.output + "/accuracy_N*.png").c_str() : "");
  return 0;
}

}  // namespace gaptrain
