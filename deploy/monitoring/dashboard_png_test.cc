#include "deploy/monitoring/dashboard_png.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

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
  // Cumulative buckets: 2 pushes/s at <= 1, 3 more at <= 2, none above.
  data[3].series = {Series({{"le", "2"}}, "2", {{t0 + 10, 5}}),
                    Series({{"le", "+Inf"}}, "+Inf", {{t0 + 10, 5}}),
                    Series({{"le", "1"}}, "1", {{t0 + 10, 2}})};

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
  // The heatmap's buckets, sorted and de-accumulated: 2, 3, 0.
  EXPECT_NE(script.find("('<= 1' 0, '<= 2' 1, '<= +Inf' 2)"), std::string::npos) << script;
  bool found = false;
  for (int i = 1; i <= 4 && !found; ++i) {
    found = ReadRaw(png + ".data/" + std::to_string(i) + ".dat") == "10 0 2\n10 1 3\n10 2 0\n\n";
  }
  EXPECT_TRUE(found) << "no data file holds the de-accumulated buckets";
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
