#include "deploy/monitoring/dashboard_png.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <nlohmann/json.hpp>

#include "deploy/monitoring/png_image.h"
#include "services/testing/test_files.h"

namespace gaptrain {
namespace {

using nlohmann::json;

// A row, a stat, a time series with a right-axis series and a heatmap.
GrafanaDashboard Dashboard() {
  const json ds = {{"type", "prometheus"}, {"uid", "${datasource}"}};
  auto panel = [&](int id, const std::string& type, const std::string& title, GridPos g,
                   const std::vector<std::string>& exprs) {
    json targets = json::array();
    for (size_t i = 0; i < exprs.size(); ++i) {
      targets.push_back({{"refId", std::string(1, static_cast<char>('A' + i))},
                         {"expr", exprs[i]},
                         {"legendFormat", i == 0 ? "{{phase}}" : "version"}});
    }
    return json{{"id", id},          {"type", type},
                {"title", title},    {"description", "Healthy: yes."},
                {"datasource", ds},  {"gridPos", {{"x", g.x}, {"y", g.y}, {"w", g.w}, {"h", g.h}}},
                {"targets", targets}};
  };
  json stat = panel(2, "stat", "Phase", {0, 1, 6, 4}, {"phase"});
  stat["options"] = {{"textMode", "value"}};
  stat["fieldConfig"] = {
      {"defaults",
       {{"mappings",
         {{{"type", "value"},
           {"options", {{"1", {{"text", "Pending"}}}, {"2", {{"text", "Running"}}}}}}}}}}};
  json lines = panel(3, "timeseries", "Rate and version", {6, 1, 18, 8}, {"rate", "version"});
  lines["fieldConfig"] = {
      {"defaults", {{"unit", "ops"}}},
      {"overrides",
       {{{"matcher", {{"id", "byName"}, {"options", "version"}}},
         {"properties", {{{"id", "custom.axisPlacement"}, {"value", "right"}}}}}}}};
  json heat = panel(4, "heatmap", "Staleness", {0, 9, 24, 6}, {"buckets"});
  heat["targets"][0]["format"] = "heatmap";
  const json d = {
      {"uid", "png-test"},
      {"title", "PNG test"},
      {"schemaVersion", 42},
      {"refresh", ""},
      {"time", {{"from", "now-1h"}, {"to", "now"}}},
      {"templating", {{"list", {{{"name", "datasource"}, {"type", "datasource"}, {"query", "prometheus"}}}}}},
      {"panels",
       {{{"id", 1}, {"type", "row"}, {"title", "A row"},
         {"gridPos", {{"x", 0}, {"y", 0}, {"w", 24}, {"h", 1}}}},
        stat, lines, heat}}};
  GrafanaDashboard dashboard;
  Status s = GrafanaDashboard::Parse(d.dump(), &dashboard);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return dashboard;
}

SeriesData Series(std::map<std::string, std::string> labels, const std::string& legend,
                  std::vector<std::pair<double, double>> points) {
  SeriesData s;
  s.labels = std::move(labels);
  s.legend = legend;
  s.points = std::move(points);
  return s;
}

// Where gridPos `g` lands on the picture: 1000 px for 24 columns, 20 px
// per unit of height under the 30 px title (DashboardPicture's defaults).
struct PixelRect {
  int left, top, right, bottom;  // right and bottom excluded
};

PixelRect At(const GridPos& g) {
  return {g.x * 1000 / 24, 30 + g.y * 20, (g.x + g.w) * 1000 / 24, 30 + (g.y + g.h) * 20};
}

constexpr uint32_t kBoxGrey = 0xc8c8c8;   // every panel's frame
constexpr uint32_t kStatGreen = 0x2a7a2a;  // a stat's value

using PixelTest = std::function<bool(uint32_t)>;

PixelTest IsColour(uint32_t rgb) {
  return [rgb](uint32_t p) { return p == rgb; };
}

// The heatmap palette's colours above its near-white zero.
bool IsOrange(uint32_t p) {
  const int r = p >> 16, g = (p >> 8) & 0xff, b = p & 0xff;
  return r >= g && g >= b && r - b >= 60;
}

int Count(const PngImage& image, const PixelTest& test, const PixelRect& r) {
  int n = 0;
  for (int y = std::max(0, r.top); y < std::min(image.height, r.bottom); ++y) {
    for (int x = std::max(0, r.left); x < std::min(image.width, r.right); ++x) {
      n += test(image.At(x, y)) ? 1 : 0;
    }
  }
  return n;
}

// Pixels passing `test` exist, all inside `r`; returns their bounding box.
PixelRect ExpectOnlyInside(const PngImage& image, const PixelTest& test, const PixelRect& r,
                           const std::string& what) {
  PixelRect box{image.width, image.height, 0, 0};
  for (int y = 0; y < image.height; ++y) {
    for (int x = 0; x < image.width; ++x) {
      if (!test(image.At(x, y))) continue;
      box = {std::min(box.left, x), std::min(box.top, y), std::max(box.right, x + 1),
             std::max(box.bottom, y + 1)};
    }
  }
  EXPECT_LT(box.left, box.right) << what << ": not drawn";
  EXPECT_TRUE(box.left >= r.left && box.right <= r.right && box.top >= r.top &&
              box.bottom <= r.bottom)
      << what << " drawn in x [" << box.left << ", " << box.right << ") y [" << box.top << ", "
      << box.bottom << "), outside its panel's x [" << r.left << ", " << r.right << ") y ["
      << r.top << ", " << r.bottom << ")";
  return box;
}

// The panel's grey frame runs along the four edges of `r` (2 px in from
// the sides): at least 90% of each edge, within a pixel.
void ExpectBoxAt(const PngImage& image, const PixelRect& r) {
  auto edge = [&](bool vertical, int at, int from, int to) {
    int hits = 0;
    for (int i = from; i < to; ++i) {
      bool hit = false;
      for (int d = -1; d <= 1; ++d) {
        const int x = vertical ? at + d : i, y = vertical ? i : at + d;
        hit |= x >= 0 && y >= 0 && x < image.width && y < image.height &&
               image.At(x, y) == kBoxGrey;
      }
      hits += hit ? 1 : 0;
    }
    return static_cast<double>(hits) / (to - from);
  };
  const std::string where = "the panel at x [" + std::to_string(r.left) + ", " +
                            std::to_string(r.right) + ") y [" + std::to_string(r.top) + ", " +
                            std::to_string(r.bottom) + ")";
  EXPECT_GE(edge(true, r.left + 2, r.top + 3, r.bottom - 3), 0.9) << "left edge of " << where;
  EXPECT_GE(edge(true, r.right - 3, r.top + 3, r.bottom - 3), 0.9) << "right edge of " << where;
  EXPECT_GE(edge(false, r.top, r.left + 4, r.right - 4), 0.9) << "top edge of " << where;
  EXPECT_GE(edge(false, r.bottom - 1, r.left + 4, r.right - 4), 0.9) << "bottom edge of " << where;
}

TEST(DashboardPngTest, DrawsEveryPanelWhereItsGridPosSays) {
  const GrafanaDashboard d = Dashboard();
  ASSERT_EQ(d.panels().size(), 4u);
  EXPECT_EQ(d.panels()[2].display.right_axis, std::vector<std::string>{"version"});
  EXPECT_EQ(d.panels()[2].display.unit, "ops");
  EXPECT_EQ(d.panels()[1].display.text_mode, "value");
  EXPECT_EQ(d.panels()[1].display.value_text.at("2"), "Running");
  const double t0 = 1700000000;
  std::vector<TargetData> data(4);
  data[0].panel = &d.panels()[1];
  data[0].target = &d.panels()[1].targets[0];
  data[0].series = {Series({}, "phase", {{t0, 1}, {t0 + 10, 2}, {t0 + 20, NAN}})};
  data[1].panel = &d.panels()[2];
  data[1].target = &d.panels()[2].targets[0];
  data[1].series = {Series({}, "updates", {{t0, NAN}, {t0 + 10, 50}, {t0 + 20, 55}})};
  data[2].panel = &d.panels()[2];
  data[2].target = &d.panels()[2].targets[1];
  data[2].series = {Series({}, "version", {{t0, 0}, {t0 + 10, 500}, {t0 + 20, 1050}})};
  data[3].panel = &d.panels()[3];
  data[3].target = &d.panels()[3].targets[0];
  // Cumulative buckets: at 10 s 2 pushes/s at <= 1, 3 more at <= 2, none
  // above; at 20 s 1, 3 and 2.
  data[3].series = {Series({{"le", "2"}}, "2", {{t0 + 10, 5}, {t0 + 20, 4}}),
                    Series({{"le", "+Inf"}}, "+Inf", {{t0 + 10, 5}, {t0 + 20, 6}}),
                    Series({{"le", "1"}}, "1", {{t0 + 10, 2}, {t0 + 20, 1}})};

  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string png = std::string(tmp != nullptr ? tmp : "/tmp") + "/board.png";
  DashboardPicture picture;
  picture.title = "PNG test";
  Status s = RenderDashboardPng(d, data, t0, picture, png);
  ASSERT_TRUE(s.ok()) << s.ToString();
  struct stat st;
  ASSERT_EQ(stat(png.c_str(), &st), 0);
  EXPECT_GT(st.st_size, 1000);

  const std::string script = ReadRaw(png + ".data/dashboard.gp");
  // 1000 px wide; 15 grid units of 20 px under a 30 px title.
  EXPECT_NE(script.find("set terminal png size 1000,330"), std::string::npos) << script;
  EXPECT_NE(script.find("'Running'"), std::string::npos) << "the stat maps its last value";
  EXPECT_NE(script.find("axes x1y2 title 'version'"), std::string::npos) << script;
  EXPECT_NE(script.find("axes x1y1 title 'updates'"), std::string::npos) << script;
  EXPECT_NE(script.find("'A row'"), std::string::npos);
  // The heatmap's buckets, sorted and de-accumulated: 2, 3, 0, then 1, 3, 2.
  EXPECT_NE(script.find("('<= 1' 0, '<= 2' 1, '<= +Inf' 2)"), std::string::npos) << script;
  bool found = false;
  for (int i = 1; i <= 4 && !found; ++i) {
    found = ReadRaw(png + ".data/" + std::to_string(i) + ".dat") ==
            "10 0 2\n10 1 3\n10 2 0\n\n20 0 1\n20 1 3\n20 2 2\n\n";
  }
  EXPECT_TRUE(found) << "no data file holds the de-accumulated buckets";

  // The picture itself: each panel's box at its gridPos, and what the panel
  // draws inside it and nowhere else.
  PngImage image;
  s = DecodePng(ReadRaw(png), &image);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(image.width, 1000);
  ASSERT_EQ(image.height, 330);
  const PixelRect row = At(d.panels()[0].grid), stat_panel = At(d.panels()[1].grid),
                  lines_panel = At(d.panels()[2].grid), heat_panel = At(d.panels()[3].grid);
  for (const PixelRect& r : {stat_panel, lines_panel, heat_panel}) ExpectBoxAt(image, r);
  // The row: its title, and no panel box.
  EXPECT_GT(Count(image, IsColour(0x000000), {0, row.top, 200, row.bottom}), 20);
  EXPECT_EQ(Count(image, IsColour(kBoxGrey), row), 0);
  // The stat's value, centred in its panel.
  const PixelRect value = ExpectOnlyInside(image, IsColour(kStatGreen), stat_panel, "stat value");
  EXPECT_NEAR((value.left + value.right) / 2.0, (stat_panel.left + stat_panel.right) / 2.0, 10);
  // gnuplot's first two line colours: the rate and the version.
  ExpectOnlyInside(image, IsColour(0x9400d3), lines_panel, "rate line");
  ExpectOnlyInside(image, IsColour(0x009e73), lines_panel, "version line");
  // The heatmap's orange palette.
  ExpectOnlyInside(image, IsOrange, heat_panel, "heatmap cells");
}

TEST(DashboardPngTest, APanelWithoutDataSaysSo) {
  const GrafanaDashboard d = Dashboard();
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string png = std::string(tmp != nullptr ? tmp : "/tmp") + "/empty.png";
  Status s = RenderDashboardPng(d, {}, 0, DashboardPicture(), png);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_NE(ReadRaw(png + ".data/dashboard.gp").find("'no data'"), std::string::npos);
}

}  // namespace
}  // namespace gaptrain
