#include "tests/task_coverage.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>

namespace gaptrain {

std::map<uint32_t, std::vector<std::pair<uint32_t, uint32_t>>> CompletedPositions(
    const std::string& log) {
  std::map<uint32_t, std::vector<std::pair<uint32_t, uint32_t>>> epochs;
  std::istringstream lines(log);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t at = line.find("] task ");
    if (at == std::string::npos || line.find(") completed by worker ") == std::string::npos) {
      continue;
    }
    unsigned long long id = 0;
    unsigned epoch = 0, begin = 0, end = 0;
    if (std::sscanf(line.c_str() + at, "] task %llu (epoch %u, positions [%u, %u))", &id, &epoch,
                    &begin, &end) == 4) {
      epochs[epoch].push_back({begin, end});
    }
  }
  return epochs;
}

void ExpectEachEpochCoveredOnce(const std::string& log, size_t epochs, uint32_t positions) {
  const auto completed = CompletedPositions(log);
  ASSERT_EQ(completed.size(), epochs) << log;
  for (const auto& [epoch, ranges] : completed) {
    std::vector<int> covered(positions, 0);
    for (const auto& [begin, end] : ranges) {
      ASSERT_LE(end, positions) << "epoch " << epoch;
      for (uint32_t p = begin; p < end; ++p) ++covered[p];
    }
    for (uint32_t p = 0; p < positions; ++p) {
      ASSERT_EQ(covered[p], 1) << "epoch " << epoch << ", position " << p << "\n" << log;
    }
  }
}

}  // namespace gaptrain
