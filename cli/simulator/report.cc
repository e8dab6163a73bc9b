#include "cli/simulator/report.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "services/base/os_error.h"
#include "services/plot/gnuplot.h"

namespace gaptrain {
namespace {

// The configuration a curve or table row stands for: everything but N and
// the seed.
std::string ConfigName(const SimulationRun& r) {
  std::ostringstream s;
  s << r.rule << " lr=" << r.learning_rate << " m=" << r.momentum;
  if (r.rule == "sync") s << " b=" << r.backup_workers;
  return s.str();
}

std::string FileSafe(std::string s) {
  for (char& c : s) {
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-')) c = '_';
  }
  return s;
}

// The autoscaled run's column, after every fixed N.
constexpr uint32_t kAutoColumn = UINT32_MAX;

uint32_t Column(const SimulationRun& r) { return r.autoscale() ? kAutoColumn : r.workers; }

std::string ColumnName(uint32_t column) {
  return column == kAutoColumn ? "auto" : std::to_string(column);
}

// Runs grouped by configuration and N, in first-seen order of configuration.
struct Groups {
  std::vector<std::string> configs;
  std::set<uint32_t> workers;
  std::map<std::pair<std::string, uint32_t>, std::vector<const RunResult*>> runs;
};

Groups Group(const std::vector<RunResult>& results) {
  Groups g;
  for (const RunResult& r : results) {
    std::string config = ConfigName(r.run);
    if (g.runs.count({config, Column(r.run)}) == 0 &&
        std::find(g.configs.begin(), g.configs.end(), config) == g.configs.end()) {
      g.configs.push_back(config);
    }
    g.workers.insert(Column(r.run));
    g.runs[{config, Column(r.run)}].push_back(&r);
  }
  return g;
}

}  // namespace

Status WriteResultsCsv(const std::string& path, const std::vector<RunResult>& results) {
  std::ofstream out(path);
  if (!out) return Status::Unavailable(path + ": cannot write");
  out << "rule,workers,learning_rate,momentum,backup_workers,seed,diverged,virtual_time,"
         "updates,epoch,test_accuracy,test_loss,mean_staleness,mean_gap,mean_penalty,"
         "live_workers\n";
  for (const RunResult& r : results) {
    for (const EvalPoint& p : r.points) {
      out << r.run.rule << ',' << r.run.workers << ',' << r.run.learning_rate << ','
          << r.run.momentum << ',' << r.run.backup_workers << ',' << r.run.seed << ','
          << (r.diverged ? 1 : 0) << ',' << p.virtual_time << ',' << p.updates << ',' << p.epoch
          << ',' << p.accuracy << ',' << p.loss << ',' << p.mean_staleness << ',' << p.mean_gap
          << ',' << p.mean_penalty << ',' << p.live_workers << '\n';
    }
  }
  out.close();
  if (!out) return Status::Unavailable(path + ": write failed");
  return Status::OK();
}

Status ReadResultsCsv(const std::string& path, std::vector<RunResult>* results) {
  std::ifstream in(path);
  if (!in) return Status::NotFound(path + ": cannot read");
  std::string line;
  std::getline(in, line);               // header
  std::map<std::string, size_t> index;  // run key -> position in *results
  results->clear();
  size_t line_number = 1;
  while (std::getline(in, line)) {
    ++line_number;
    std::vector<std::string> f;
    std::stringstream fields(line);
    std::string field;
    while (std::getline(fields, field, ',')) f.push_back(field);
    // 15 fields before live_workers was added.
    if (f.size() != 16 && f.size() != 15) {
      return Status::InvalidArgument(path + ": line " + std::to_string(line_number) + " has " +
                                     std::to_string(f.size()) + " fields, expected 16");
    }
    try {
      SimulationRun run;
      run.rule = f[0];
      run.workers = static_cast<uint32_t>(std::stoul(f[1]));
      run.learning_rate = std::stod(f[2]);
      run.momentum = std::stod(f[3]);
      run.backup_workers = static_cast<uint32_t>(std::stoul(f[4]));
      run.seed = std::stoull(f[5]);
      const std::string key = run.Label();
      auto it = index.find(key);
      if (it == index.end()) {
        it = index.emplace(key, results->size()).first;
        results->emplace_back();
        results->back().run = run;
      }
      RunResult& r = (*results)[it->second];
      r.diverged = f[6] == "1";
      EvalPoint p;
      p.virtual_time = std::stod(f[7]);
      p.updates = std::stoull(f[8]);
      p.epoch = std::stod(f[9]);
      p.accuracy = std::stod(f[10]);
      p.loss = std::stod(f[11]);
      p.mean_staleness = std::stod(f[12]);
      p.mean_gap = std::stod(f[13]);
      p.mean_penalty = std::stod(f[14]);
      p.live_workers = f.size() > 15 ? static_cast<uint32_t>(std::stoul(f[15])) : run.workers;
      r.points.push_back(p);
    } catch (const std::exception&) {
      return Status::InvalidArgument(path + ": line " + std::to_string(line_number) +
                                     ": a field is not a number");
    }
  }
  return Status::OK();
}

namespace {

// "mean ± std" over the values (std with n − 1), each with `digits` decimals.
std::string MeanAndDeviation(const std::vector<double>& values, int digits) {
  double mean = 0, var = 0;
  for (double v : values) mean += v;
  mean /= values.size();
  for (double v : values) var += (v - mean) * (v - mean);
  const double sd = values.size() > 1 ? std::sqrt(var / (values.size() - 1)) : 0;
  char cell[64];
  std::snprintf(cell, sizeof cell, "%.*f ± %.*f", digits, mean, digits, sd);
  return cell;
}

// A Markdown table: a row per configuration, a column per N, each cell
// `cell(the seeds' runs)`.
std::string Table(const std::vector<RunResult>& results,
                  const std::function<std::string(const std::vector<const RunResult*>&)>& cell) {
  Groups g = Group(results);
  std::ostringstream s;
  s << "| configuration |";
  for (uint32_t n : g.workers) s << " N=" << ColumnName(n) << " |";
  s << "\n|---|";
  for (size_t i = 0; i < g.workers.size(); ++i) s << "---|";
  s << "\n";
  for (const std::string& config : g.configs) {
    s << "| " << config << " |";
    for (uint32_t n : g.workers) {
      auto it = g.runs.find({config, n});
      s << (it == g.runs.end() ? "" : " " + cell(it->second)) << " |";
    }
    s << "\n";
  }
  return s.str();
}

}  // namespace

std::string SummaryTable(const std::vector<RunResult>& results) {
  return Table(results, [](const std::vector<const RunResult*>& runs) {
    std::vector<double> accuracy;
    for (const RunResult* r : runs) {
      if (!r->diverged) accuracy.push_back(100.0 * r->points.back().accuracy);
    }
    if (accuracy.size() < runs.size()) {
      return "diverged (" + std::to_string(runs.size() - accuracy.size()) + "/" +
             std::to_string(runs.size()) + ")";
    }
    return MeanAndDeviation(accuracy, 2);
  });
}

std::string TimeToTargetTable(const std::vector<RunResult>& results, double target) {
  char head[96];
  std::snprintf(head, sizeof head, "Virtual time to reach %.2f%% test accuracy", 100 * target);
  return std::string(head) + " (mean ± std over seeds; \"never (k/n)\": k seeds never did):\n\n" +
         Table(results, [target](const std::vector<const RunResult*>& runs) {
           std::vector<double> times;
           for (const RunResult* r : runs) {
             for (const EvalPoint& p : r->points) {
               if (!r->diverged && p.accuracy >= target) {
                 times.push_back(p.virtual_time);
                 break;
               }
             }
           }
           if (times.size() < runs.size()) {
             return "never (" + std::to_string(runs.size() - times.size()) + "/" +
                    std::to_string(runs.size()) + ")";
           }
           return MeanAndDeviation(times, 0);
         });
}

std::string ScaleChangesText(const std::vector<RunResult>& results) {
  std::ostringstream s;
  for (const RunResult& r : results) {
    if (!r.run.autoscale()) continue;
    s << "- " << r.run.Label() << ": " << r.scale_changes.size() << " changes\n";
    for (const ScaleChange& c : r.scale_changes) {
      char time[32];
      std::snprintf(time, sizeof time, "%.0f", c.virtual_time);
      s << "  - t=" << time << ": " << c.message << "\n";
    }
  }
  return s.str();
}

Status PlotResults(const std::string& dir, const std::vector<RunResult>& results) {
  const std::string data_dir = dir + "/curves";
  GAPTRAIN_RETURN_IF_ERROR(MakeDirs(data_dir));
  Groups g = Group(results);
  const std::string script_path = dir + "/plot.gp";
  std::ofstream gp(script_path);
  if (!gp) return Status::Unavailable(script_path + ": cannot write");
  gp << "set terminal pngcairo size 1700,600 font ',10'\n"
        "set grid\nset key outside right top spacing 1.1\n";
  // A colour per rule, a dash pattern per variant of that rule (learning
  // rate, momentum, backups), so twenty lines stay tellable apart.
  static const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                                  "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};
  std::map<std::string, int> rule_color, rule_variants;
  std::map<std::string, std::string> style;
  for (const std::string& config : g.configs) {
    const std::string rule = config.substr(0, config.find(' '));
    if (rule_color.count(rule) == 0) {
      int next = static_cast<int>(rule_color.size());
      rule_color[rule] = next;
    }
    int dash = ++rule_variants[rule];
    style[config] = std::string("lc rgb '") + kColors[rule_color[rule] % 8] + "' dt " +
                    std::to_string(dash) + " lw 1.5";
  }

  std::map<std::pair<std::string, uint32_t>, std::string> curve_files;
  for (uint32_t n : g.workers) {
    std::vector<std::pair<std::string, std::string>> curves;  // title, file
    for (const std::string& config : g.configs) {
      auto it = g.runs.find({config, n});
      if (it == g.runs.end()) continue;
      // Mean over seeds, point by point, over the points all seeds have.
      size_t points = SIZE_MAX;
      for (const RunResult* r : it->second) points = std::min(points, r->points.size());
      if (points == 0 || points == SIZE_MAX) continue;
      const std::string file = data_dir + "/" + FileSafe(config) + "_N" + ColumnName(n) + ".dat";
      std::ofstream dat(file);
      dat << "# epoch virtual_time test_accuracy live_workers (mean over " << it->second.size()
          << " seeds)\n";
      for (size_t i = 0; i < points; ++i) {
        double epoch = 0, time = 0, acc = 0, live = 0;
        for (const RunResult* r : it->second) {
          epoch += r->points[i].epoch;
          time += r->points[i].virtual_time;
          acc += r->points[i].accuracy;
          live += r->points[i].live_workers;
        }
        double k = static_cast<double>(it->second.size());
        dat << epoch / k << ' ' << time / k << ' ' << acc / k << ' ' << live / k << '\n';
      }
      curves.push_back({config, file});
      curve_files[{config, n}] = file;
    }
    if (curves.empty()) continue;
    gp << "set output '" << dir << "/accuracy_N" << ColumnName(n) << ".png'\n"
       << "set multiplot layout 1,2 title 'N = " << ColumnName(n) << " workers'\n";
    // Only the right panel carries the key.
    for (int panel = 0; panel < 2; ++panel) {
      gp << (panel == 0 ? "unset key\n" : "set key outside right top\n");
      gp << "set xlabel '" << (panel == 0 ? "epoch" : "virtual time") << "'\n"
         << "set ylabel 'test accuracy'\nplot ";
      for (size_t i = 0; i < curves.size(); ++i) {
        gp << (i ? ", " : "") << "'" << curves[i].second << "' using " << (panel == 0 ? "1" : "2")
           << ":3 with linespoints pt 7 ps 0.4 " << style[curves[i].first] << " title '"
           << curves[i].first << "'";
      }
      gp << "\n";
    }
    gp << "unset multiplot\n";
  }

  // Each configuration with an autoscaled run: accuracy against virtual
  // time for every N and auto (log scale: N = 1 takes 64 times N = 64's
  // time), and the autoscaled run's N over time.
  for (const std::string& config : g.configs) {
    if (curve_files.count({config, kAutoColumn}) == 0) continue;
    gp << "set output '" << dir << "/autoscale_" << FileSafe(config) << ".png'\n"
       << "set multiplot layout 1,2 title '" << config << ": fixed N and autoscaled'\n"
       << "set key inside right bottom\nset logscale x\nset xlabel 'virtual time'\n"
       << "set ylabel 'test accuracy'\nset yrange [0.8:*]\nplot ";
    bool first = true;
    for (uint32_t n : g.workers) {
      auto it = curve_files.find({config, n});
      if (it == curve_files.end()) continue;
      gp << (first ? "" : ", ") << "'" << it->second << "' using 2:3 with linespoints pt 7 ps 0.4 "
         << (n == kAutoColumn ? "lw 3 lc rgb 'black'" : "lw 1.5") << " title 'N = " << ColumnName(n)
         << "'";
      first = false;
    }
    gp << "\nunset logscale x\nset yrange [*:*]\nset ylabel 'live workers (mean over seeds)'\n"
       << "unset key\nplot '" << curve_files[{config, kAutoColumn}]
       << "' using 2:4 with steps lw 2 lc rgb 'black'\nunset multiplot\n";
  }
  gp.close();

  return RunGnuplot(script_path);
}

}  // namespace gaptrain
