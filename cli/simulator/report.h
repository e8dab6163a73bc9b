// What `gaptrain simulate` writes: a CSV row per evaluation, a Markdown
// table of final accuracy (mean ± standard deviation over seeds, diverged
// runs marked), and PNG plots drawn by gnuplot.

#ifndef GAPTRAIN_CLI_SIMULATOR_REPORT_H_
#define GAPTRAIN_CLI_SIMULATOR_REPORT_H_

#include <string>
#include <vector>

#include "cli/simulator/simulator.h"
#include "services/base/status.h"

namespace gaptrain {

// Header: rule,workers,learning_rate,momentum,backup_workers,seed,diverged,
// virtual_time,updates,epoch,test_accuracy,test_loss,mean_staleness,
// mean_gap,mean_penalty,live_workers (workers 0: the autoscaled run).
Status WriteResultsCsv(const std::string& path, const std::vector<RunResult>& results);

// Reads a results.csv written by WriteResultsCsv back into runs (with
// their evaluation points; timings are not in the file).
Status ReadResultsCsv(const std::string& path, std::vector<RunResult>* results);

// Rows: rule with lr, momentum (and b for sync); columns: N. A cell is the
// final accuracy in percent, "mean ± std" over seeds, or "diverged (k/n)".
std::string SummaryTable(const std::vector<RunResult>& results);

// Rows and columns as SummaryTable's; a cell is the virtual time at the
// first evaluation with test accuracy >= `target` (a fraction), "mean ±
// std" over seeds, or "never (k/n)" when k seeds never reached it. Starts
// with a line saying so.
std::string TimeToTargetTable(const std::vector<RunResult>& results, double target);

// The autoscaled runs' changes of N, one Markdown list item per run with
// one sub-item per change: virtual time and the policy's message. Empty
// without autoscaled runs. (Not in results.csv.)
std::string ScaleChangesText(const std::vector<RunResult>& results);

// One PNG per N, `<dir>/accuracy_N<n>.png`: test accuracy against epoch
// and against virtual time, a line per configuration (mean over seeds).
// With autoscaled runs, also `<dir>/autoscale_<configuration>.png`: accuracy
// against virtual time for every N and auto, and auto's N over time.
// Needs gnuplot on PATH; the error says how to install it.
Status PlotResults(const std::string& dir, const std::vector<RunResult>& results);

}  // namespace gaptrain

#endif  // GAPTRAIN_CLI_SIMULATOR_REPORT_H_
