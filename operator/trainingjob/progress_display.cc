#include "operator/trainingjob/progress_display.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "operator/trainingjob/object_fields.h"
#include "services/api/job_fields.h"

namespace gaptrain {
namespace trainingjob {
namespace {

std::string Printf(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

std::optional<double> Finite(const nlohmann::json& progress, const char* key) {
  const std::optional<double> v = NumberAt(progress, {key});
  if (v && std::isfinite(*v)) return v;
  return std::nullopt;
}

}  // namespace

std::string EpochText(double done, double epochs) {
  // Rounded down, so "4.0/4" means finished and 3.96 epochs reads 3.9; the
  // 1e-9 keeps a tenth that a double holds just below itself (0.3 is
  // 0.2999...) from reading as the tenth before.
  const double tenths = std::floor(std::max(0.0, done) * 10 + 1e-9);
  std::string text = Printf("%.1f", tenths / 10);
  if (epochs > 0) text += "/" + FormatNumber(epochs);
  return text;
}

std::string AccuracyText(double accuracy) { return Printf("%.2f%%", 100 * accuracy); }

std::string GapText(double gap) { return Printf("%.2f", gap); }

std::string RateText(double updates_per_second) {
  // "%.1f" would print 9.96 as "10.0": the cut is where it rounds to 10.
  return Printf(updates_per_second < 9.95 ? "%.1f" : "%.0f", std::max(0.0, updates_per_second));
}

std::string TargetText(const TargetSpec& target, std::optional<double> value) {
  return value ? target.Progress(*value) : target.Text();
}

nlohmann::json ProgressDisplay(const nlohmann::json& progress, double epochs,
                               const std::string& phase, const TargetSpec& target) {
  nlohmann::json display = nlohmann::json::object();
  if (const auto done = Finite(progress, "epoch")) display["epoch"] = EpochText(*done, epochs);
  if (const auto accuracy = Finite(progress, "testAccuracy")) {
    display["accuracy"] = AccuracyText(*accuracy);
  }
  if (target.IsSet()) {
    std::optional<double> value;
    if (target.metric == "accuracy") {
      value = Finite(progress, "testAccuracy");
    } else if (target.metric == "loss") {
      value = Finite(progress, "testLoss");
    } else {
      value = Finite(ObjectAt(progress, {"testMetrics"}), target.metric.c_str());
    }
    display["target"] = TargetText(target, value);
  }
  if (const auto gap = Finite(progress, "meanGap")) display["gap"] = GapText(*gap);
  if (const auto rate = Finite(progress, "updatesPerSecond"); rate && phase == "Running") {
    display["updatesPerSecond"] = RateText(*rate);
  }
  return display;
}

}  // namespace trainingjob
}  // namespace gaptrain
