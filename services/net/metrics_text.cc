#include "services/net/metrics_text.h"

#include <cstdlib>
#include <sstream>

namespace gaptrain {

MetricsSample ParseMetricsText(const std::string& text) {
  MetricsSample sample;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    // The series ends at the first space outside the label braces (label
    // values may hold spaces).
    size_t end = 0;
    bool in_labels = false, in_quotes = false;
    for (; end < line.size(); ++end) {
      const char c = line[end];
      if (in_quotes) {
        if (c == '\\') ++end;
        else if (c == '"') in_quotes = false;
      } else if (c == '"' && in_labels) {
        in_quotes = true;
      } else if (c == '{') {
        in_labels = true;
      } else if (c == '}') {
        in_labels = false;
      } else if (c == ' ' && !in_labels) {
        break;
      }
    }
    if (end == 0 || end >= line.size()) continue;
    const char* begin = line.c_str() + end + 1;
    char* parsed_end = nullptr;
    const double value = std::strtod(begin, &parsed_end);  // also NaN, +Inf
    // The value ends the line or is followed by a timestamp: "12abc" or
    // "nanny" is not a number.
    if (parsed_end == begin || (*parsed_end != '\0' && *parsed_end != ' ')) continue;
    sample[line.substr(0, end)] = value;
  }
  return sample;
}

double MetricValue(const MetricsSample& sample, const std::string& series, double absent) {
  const auto it = sample.find(series);
  return it == sample.end() ? absent : it->second;
}

}  // namespace gaptrain
