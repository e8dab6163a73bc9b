#include "cli/simulator/simulate_command.h"

#include <algorithm>
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
    "usage: gaptrain simulate -f JOB.yaml [--output DIR] [--parallel K] [--target-accuracy F]\n"
    "       gaptrain simulate --replot DIR [--target-accuracy F]\n"
    "         (redraw DIR's summary and plots from its results.csv)\n"
    "  Runs spec.simulation of the TrainingJob: N virtual workers per run,\n"
    "  real gradients, the real update rules. Writes DIR/results.csv,\n"
    "  DIR/summary.md and DIR/accuracy_N<n>.png (autoscaled runs: N=auto,\n"
    "  and DIR/autoscale_<configuration>.png). --target-accuracy (a fraction;\n"
    "  spec.simulation.targetAccuracy) adds the table of virtual time to reach it.\n";

int Fail(const std::string& message, int code) {
  std::fprintf(stderr, "gaptrain simulate: %s\n", message.c_str());
  return code;
}

bool ParseFraction(const std::string& text, double* out) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(v >= 0 && v <= 1)) return false;
  *out = v;
  return true;
}

// The summary: final accuracy, then the time to the target and the
// autoscaled runs' changes of N when there are any.
std::string Summary(const std::string& name, const std::vector<RunResult>& results,
                    double target_accuracy) {
  std::string text = "# " + name + ": final test accuracy (%)\n\n" + SummaryTable(results);
  if (target_accuracy > 0) text += "\n" + TimeToTargetTable(results, target_accuracy);
  const std::string changes = ScaleChangesText(results);
  if (!changes.empty()) text += "\nThe autoscaled runs' changes of N:\n\n" + changes;
  return text;
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
  double target_accuracy = -1;  // -1: spec.simulation's
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
    } else if (a == "--target-accuracy" && has_value) {
      if (!ParseFraction(args[++i], &target_accuracy)) {
        return Fail("--target-accuracy: must be a fraction in [0, 1], got '" + args[i] + "'", 2);
      }
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
    const std::string table = Summary(replot, results, std::max(target_accuracy, 0.0));
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
  if (target_accuracy >= 0) spec.target_accuracy = target_accuracy;

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
  const std::string summary = Summary(job.name, results, spec.target_accuracy);
  std::ofstream(spec.output + "/summary.md") << summary;

  std::printf("\n%s\n", summary.c_str());
  std::printf("%zu runs in %.0f s. Results: %s/results.csv, %s/summary.md%s\n", runs.size(),
              seconds, spec.output.c_str(), spec.output.c_str(),
              s.ok() ? (", plots " + spec.output + "/accuracy_N*.png").c_str() : "");
  return 0;
}

}  // namespace gaptrain
