#include "deploy/monitoring/dashboard_png.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "services/base/os_error.h"
#include "services/plot/gnuplot.h"

namespace gaptrain {
namespace {

constexpr int kTitlePixels = 30;

// A gnuplot single-quoted string.
std::string Quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') out += "''";
    else if (c != '\n') out += c;
  }
  return out + "'";
}

std::string Number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", v);
  return text;
}

// A stat's value as the panel's unit and decimals show it.
std::string FormatValue(double v, const PanelDisplay& display) {
  if (!std::isfinite(v)) return "-";
  auto mapped = display.value_text.find(Number(v));
  if (mapped != display.value_text.end()) return mapped->second;
  const int decimals = display.decimals >= 0 ? display.decimals : -1;
  char text[64];
  if (display.unit == "percentunit") {
    std::snprintf(text, sizeof text, "%.*f%%", decimals >= 0 ? decimals : 1, 100 * v);
  } else if (display.unit == "s") {
    std::snprintf(text, sizeof text, "%.*f s", decimals >= 0 ? decimals : 1, v);
  } else if (decimals >= 0) {
    std::snprintf(text, sizeof text, "%.*f", decimals, v);
  } else {
    std::snprintf(text, sizeof text, "%.4g", v);
  }
  return text;
}

double LastFinite(const SeriesData& s) {
  for (auto it = s.points.rbegin(); it != s.points.rend(); ++it) {
    if (std::isfinite(it->second)) return it->second;
  }
  return NAN;
}

// Where a gridPos lands on the canvas, in screen fractions (origin at the
// bottom left, as gnuplot counts).
struct Frame {
  double x, y, w, h;
};

class Canvas {
 public:
  Canvas(const DashboardPicture& picture, int grid_units)
      : picture_(picture),
        height_(kTitlePixels + grid_units * picture.row_unit_pixels) {}

  int height() const { return height_; }

  Frame At(const GridPos& g) const {
    const double top = kTitlePixels + g.y * picture_.row_unit_pixels;
    const double h = g.h * picture_.row_unit_pixels;
    return {g.x / 24.0, 1 - (top + h) / height_, g.w / 24.0, h / height_};
  }

 private:
  DashboardPicture picture_;
  int height_;
};

// Resets what one panel's drawing may have set.
const char kPanelPrologue[] =
    "unset label; unset object; unset title; unset key; unset xlabel; unset ylabel\n"
    "unset y2tics; set xtics autofreq nomirror; set ytics autofreq nomirror\n"
    "set format x '%g'; set format y '%g'; set border 3; set grid\n"
    "unset colorbox; set autoscale; set xrange [*:*]; set yrange [*:*]\n";

// Draws only text in `frame`: gnuplot draws labels with a plot.
void TextOnly(std::ostream& gp, const Frame& frame) {
  gp << "set origin " << frame.x << "," << frame.y << "; set size " << frame.w << ","
     << frame.h << "\n"
     << "unset border; unset tics; unset grid\n"
     << "plot [0:1][0:1] NaN notitle\n";
}

void PanelBox(std::ostream& gp, const Frame& f) {
  gp << "set object 1 rectangle from screen " << f.x + 0.002 << "," << f.y + 0.001
     << " to screen " << f.x + f.w - 0.002 << "," << f.y + f.h - 0.001
     << " fillstyle empty border lc rgb '#c8c8c8' behind\n";
}

// A series' points, one "t value" line each, times from `start`.
Status WriteSeries(const std::string& path, const SeriesData& s, double start) {
  std::ofstream out(path);
  if (!out) return Status::Unavailable(path + ": cannot write");
  for (const auto& [t, v] : s.points) out << Number(t - start) << ' ' << Number(v) << '\n';
  return out ? Status::OK() : Status::Unavailable(path + ": write failed");
}

// Prometheus's cumulative buckets of one heatmap target as rates per
// bucket: "t bucket-index rate" lines, a blank line after each time.
// *bounds gets the upper bounds, in order.
Status WriteHeatmap(const std::string& path, const TargetData& t, double start,
                    std::vector<std::string>* bounds) {
  std::vector<std::pair<double, const SeriesData*>> buckets;
  for (const SeriesData& s : t.series) {
    auto le = s.labels.find("le");
    if (le == s.labels.end()) continue;
    const double bound = le->second == "+Inf" ? INFINITY : std::strtod(le->second.c_str(), nullptr);
    buckets.push_back({bound, &s});
  }
  std::sort(buckets.begin(), buckets.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::set<double> times;
  std::vector<std::map<double, double>> values(buckets.size());
  for (size_t i = 0; i < buckets.size(); ++i) {
    bounds->push_back(buckets[i].second->labels.at("le"));
    for (const auto& [time, v] : buckets[i].second->points) {
      times.insert(time);
      values[i][time] = v;
    }
  }
  std::ofstream out(path);
  if (!out) return Status::Unavailable(path + ": cannot write");
  for (double time : times) {
    double below = 0;
    for (size_t i = 0; i < buckets.size(); ++i) {
      auto it = values[i].find(time);
      const double cumulative = it != values[i].end() && std::isfinite(it->second) ? it->second : below;
      out << Number(time - start) << ' ' << i << ' ' << Number(std::max(0.0, cumulative - below))
          << '\n';
      below = std::max(below, cumulative);
    }
    out << '\n';
  }
  return out ? Status::OK() : Status::Unavailable(path + ": write failed");
}

}  // namespace

Status RenderDashboardPng(const GrafanaDashboard& dashboard, const std::vector<TargetData>& data,
                          double range_start, const DashboardPicture& picture,
                          const std::string& png_path) {
  const std::string dir = png_path + ".data";
  GAPTRAIN_RETURN_IF_ERROR(MakeDirs(dir));
  int grid_units = 1;
  double range_end = range_start + 1;
  for (const DashboardPanel& p : dashboard.panels()) {
    grid_units = std::max(grid_units, p.grid.y + p.grid.h);
  }
  std::map<int, std::vector<const TargetData*>> by_panel;
  for (const TargetData& t : data) {
    by_panel[t.panel->id].push_back(&t);
    for (const SeriesData& s : t.series) {
      if (!s.points.empty()) range_end = std::max(range_end, s.points.back().first);
    }
  }
  const Canvas canvas(picture, grid_units);

  const std::string script = dir + "/dashboard.gp";
  std::ofstream gp(script);
  if (!gp) return Status::Unavailable(script + ": cannot write");
  gp << "set terminal png size " << picture.width_pixels << "," << canvas.height()
     << " font 'DejaVu Sans,7'\n"
     << "set output " << Quote(png_path) << "\n"
     << "set termoption noenhanced\n"
     << "set datafile missing 'NaN'\n"
     << "set palette defined (0 '#fff7ec', 1 '#fdae6b', 2 '#d94801', 3 '#7f2704')\n"
     << "set multiplot\n";
  // The dashboard's title across the top.
  gp << kPanelPrologue
     << "set label 1 " << Quote(picture.title) << " at screen 0.005, screen "
     << 1 - 15.0 / canvas.height() << " left font ',11'\n";
  TextOnly(gp, {0, 1 - static_cast<double>(kTitlePixels) / canvas.height(), 1,
                static_cast<double>(kTitlePixels) / canvas.height()});

  int file_index = 0;
  for (const DashboardPanel& panel : dashboard.panels()) {
    const Frame f = canvas.At(panel.grid);
    gp << kPanelPrologue;
    const std::vector<const TargetData*>& targets = by_panel[panel.id];
    if (panel.type == "row") {
      gp << "set label 1 " << Quote(panel.title) << " at screen " << f.x + 0.005 << ", screen "
         << f.y + f.h / 2 << " left font ',10'\n";
      TextOnly(gp, f);
      continue;
    }
    PanelBox(gp, f);
    if (panel.type == "stat") {
      std::vector<std::string> lines;
      for (const TargetData* t : targets) {
        for (const SeriesData& s : t->series) {
          if (panel.display.text_mode == "name") {
            lines.push_back(s.legend);
          } else if (panel.display.text_mode == "value_and_name") {
            lines.push_back(s.legend + " " + FormatValue(LastFinite(s), panel.display));
          } else {
            lines.push_back(FormatValue(LastFinite(s), panel.display));
          }
        }
      }
      gp << "set label 1 " << Quote(panel.title) << " at screen " << f.x + 0.006 << ", screen "
         << f.y + f.h - 12.0 / canvas.height() << " left font ',8'\n";
      for (size_t i = 0; i < lines.size(); ++i) {
        const double y = f.y + f.h * (0.45 - 0.25 * (i - (lines.size() - 1) / 2.0));
        gp << "set label " << i + 2 << " " << Quote(lines[i]) << " at screen " << f.x + f.w / 2
           << ", screen " << y << " center font ',13' tc rgb '#2a7a2a'\n";
      }
      TextOnly(gp, f);
      continue;
    }
    gp << "set origin " << f.x << "," << f.y << "; set size " << f.w << "," << f.h << "\n"
       << "set title " << Quote(panel.title) << " font ',8'\n"
       << "set xrange [0:" << Number(range_end - range_start) << "]\n"
       << "set format x '%gs'\n";
    std::vector<std::string> plots;
    if (panel.type == "heatmap") {
      for (const TargetData* t : targets) {
        std::vector<std::string> bounds;
        const std::string file = dir + "/" + std::to_string(++file_index) + ".dat";
        GAPTRAIN_RETURN_IF_ERROR(WriteHeatmap(file, *t, range_start, &bounds));
        if (bounds.empty()) continue;
        gp << "set yrange [-0.5:" << bounds.size() - 0.5 << "]\nset ytics (";
        for (size_t i = 0; i < bounds.size(); ++i) {
          gp << (i ? ", " : "") << Quote("<= " + bounds[i]) << " " << i;
        }
        gp << ")\nunset grid\n";
        plots.push_back(Quote(file) + " using 1:2:3 with image notitle");
      }
    } else {
      const std::set<std::string> right(panel.display.right_axis.begin(),
                                        panel.display.right_axis.end());
      bool any_right = false;
      for (const TargetData* t : targets) {
        for (const SeriesData& s : t->series) {
          if (!s.HasFiniteValue()) continue;
          const std::string file = dir + "/" + std::to_string(++file_index) + ".dat";
          GAPTRAIN_RETURN_IF_ERROR(WriteSeries(file, s, range_start));
          const bool on_right = right.count(s.legend) > 0;
          any_right = any_right || on_right;
          plots.push_back(Quote(file) + " using 1:2 with lines lw 1.2 axes " +
                          (on_right ? "x1y2" : "x1y1") + " title " + Quote(s.legend));
        }
      }
      if (any_right) gp << "set y2tics; set border 11\n";
      gp << "set key top left font ',6' samplen 1 spacing 0.8 opaque\n";
    }
    if (plots.empty()) {
      gp << "set label 1 'no data' at graph 0.5, graph 0.5 center\n"
         << "plot [0:1][0:1] NaN notitle\n";
      continue;
    }
    gp << "plot ";
    for (size_t i = 0; i < plots.size(); ++i) gp << (i ? ", " : "") << plots[i];
    gp << "\n";
  }
  gp << "unset multiplot\n";
  gp.close();
  if (!gp) return Status::Unavailable(script + ": write failed");
  return RunGnuplot(script);
}

}  // namespace gaptrain
