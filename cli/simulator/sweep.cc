#include "cli/simulator/sweep.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <thread>

#include "services/base/available_cpus.h"
#include "services/learn/compute_threads.h"

namespace gaptrain {

std::vector<SimulationRun> ExpandSweep(const SimulationSpec& spec) {
  std::vector<SimulationRun> runs;
  // 0 stands for the autoscaled run (SimulationRun::autoscale), after the fixed ones.
  std::vector<uint64_t> worker_counts = spec.workers;
  if (spec.autoscale) worker_counts.push_back(0);
  for (const std::string& rule : spec.rules) {
    for (uint64_t n : worker_counts) {
      for (double lr : spec.learning_rates) {
        for (double m : spec.momenta) {
          std::vector<uint64_t> backups =
              rule == "sync" ? spec.backup_workers : std::vector<uint64_t>{0};
          for (uint64_t b : backups) {
            for (uint64_t seed : spec.seeds) {
              SimulationRun r;
              r.rule = rule;
              r.workers = static_cast<uint32_t>(n);
              r.learning_rate = lr;
              r.momentum = m;
              r.seed = seed;
              r.backup_workers = static_cast<uint32_t>(b);
              runs.push_back(r);
            }
          }
        }
      }
    }
  }
  return runs;
}

namespace {

// The shared progress display: one line per running slot, redrawn in place
// on a terminal.
class ProgressLine {
 public:
  ProgressLine(FILE* out, size_t total, size_t slots)
      : out_(out), tty_(out != nullptr && isatty(fileno(out))), total_(total), slots_(slots) {}

  void Update(size_t slot, const std::string& text) {
    if (!tty_) return;
    std::lock_guard<std::mutex> lock(mu_);
    slots_[slot] = text;
    Draw();
  }

  void Finished(size_t slot, const std::string& text) {
    if (out_ == nullptr) return;
    std::lock_guard<std::mutex> lock(mu_);
    ++done_;
    slots_[slot].clear();
    if (tty_) std::fprintf(out_, "\r\033[K");
    std::fprintf(out_, "[%zu/%zu] %s\n", done_, total_, text.c_str());
    if (tty_) Draw();
    std::fflush(out_);
  }

 private:
  void Draw() {
    std::string line = "[" + std::to_string(done_) + "/" + std::to_string(total_) + "]";
    for (const std::string& s : slots_) {
      if (!s.empty()) line += "  " + s;
    }
    if (line.size() > 160) line.resize(160);
    std::fprintf(out_, "\r\033[K%s", line.c_str());
    std::fflush(out_);
  }

  FILE* out_;
  bool tty_;
  size_t total_;
  size_t done_ = 0;
  std::vector<std::string> slots_;
  std::mutex mu_;
};

std::string Percent(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", 100.0 * x);
  return buf;
}

}  // namespace

Status RunSweep(const TrainingJob& job, const SimulationSpec& spec, const SimulationData& data,
                FILE* progress_out, std::vector<RunResult>* results) {
  const std::vector<SimulationRun> runs = ExpandSweep(spec);
  size_t parallel = spec.parallel > 0 ? spec.parallel : AvailableCpus();
  parallel = std::max<size_t>(1, std::min(parallel, runs.size()));
  SetComputeThreads(1);

  results->assign(runs.size(), RunResult());
  std::vector<Status> statuses(runs.size());
  std::atomic<size_t> next{0};
  ProgressLine progress(progress_out, runs.size(), parallel);

  auto work = [&](size_t slot) {
    for (size_t i = next++; i < runs.size(); i = next++) {
      const SimulationRun& run = runs[i];
      ProgressCallback callback = [&](const SimulationProgress& p) {
        progress.Update(slot, run.Label() + " " + std::to_string(int(p.fraction * 100)) + "% acc " +
                                  Percent(p.last_accuracy));
      };
      statuses[i] = RunSimulation(job, spec, run, data, callback, &(*results)[i]);
      const RunResult& r = (*results)[i];
      std::string text = run.Label() + ": ";
      if (!statuses[i].ok()) {
        text += "error: " + statuses[i].ToString();
      } else if (r.diverged) {
        text += "diverged";
      } else {
        text += "accuracy " + Percent(r.points.back().accuracy);
      }
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, " (%.0f s)", r.seconds_total);
      progress.Finished(slot, text + seconds);
    }
  };
  std::vector<std::thread> threads;
  for (size_t slot = 1; slot < parallel; ++slot) threads.emplace_back(work, slot);
  work(0);
  for (std::thread& t : threads) t.join();

  for (size_t i = 0; i < runs.size(); ++i) {
    if (!statuses[i].ok()) {
      return Status(statuses[i].code(), runs[i].Label() + ": " + statuses[i].message());
    }
  }
  return Status::OK();
}

}  // namespace gaptrain
