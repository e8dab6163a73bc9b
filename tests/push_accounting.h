// ExpectEveryPushAccountedFor: the acceptance check of a `gaptrain run`
// whose master was killed and restored (the chaos tests): every push the
// master's ledger recorded is an update or a rejection, the final version
// is the updates less those the restores lost, and lost updates were
// trained again. Records gtest failures; prints the ledger as a FIGURE line.

#ifndef GAPTRAIN_TESTS_PUSH_ACCOUNTING_H_
#define GAPTRAIN_TESTS_PUSH_ACCOUNTING_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace gaptrain {

// `run_dir` is the run's directory and `summary` its summary.json;
// `restores` the number of times the master was restored.
void ExpectEveryPushAccountedFor(const std::string& run_dir, const nlohmann::json& summary,
                                 uint64_t restores);

}  // namespace gaptrain

#endif  // GAPTRAIN_TESTS_PUSH_ACCOUNTING_H_
