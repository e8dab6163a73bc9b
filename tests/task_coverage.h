// What a coordinator's log says its completed tasks covered, for tests that
// count every sample or shard of each epoch: the coordinator logs one line
// a completion, "task 7 (epoch 1, positions [448, 512)) completed by
// worker 3", under gaptrain run (coordinator.log) and in its pod alike.

#ifndef GAPTRAIN_TESTS_TASK_COVERAGE_H_
#define GAPTRAIN_TESTS_TASK_COVERAGE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace gaptrain {

// Epoch -> the position ranges of its completed tasks, in the order
// completed.
std::map<uint32_t, std::vector<std::pair<uint32_t, uint32_t>>> CompletedPositions(
    const std::string& log);

// A GoogleTest failure unless `log` shows `epochs` epochs whose completed
// tasks tile [0, positions) exactly once each: none twice, none missing.
void ExpectEachEpochCoveredOnce(const std::string& log, size_t epochs, uint32_t positions);

}  // namespace gaptrain

#endif  // GAPTRAIN_TESTS_TASK_COVERAGE_H_
