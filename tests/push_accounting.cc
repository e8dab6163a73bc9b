#include "tests/push_accounting.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "services/master/push_ledger.h"

namespace gaptrain {

void ExpectEveryPushAccountedFor(const std::string& run_dir, const nlohmann::json& summary,
                                 uint64_t restores) {
  PushLedger::Totals ledger;
  Status read = PushLedger::Read(run_dir + "/checkpoints/" + PushLedger::kFileName, &ledger);
  ASSERT_TRUE(read.ok()) << read.ToString();
  const uint64_t version = summary["version"];
  std::printf(
      "FIGURE ledger: %llu pushes, %llu rejected, %llu updates applied, %llu lost in %llu "
      "restores; final version %llu; retrained %llu tasks, %llu samples\n",
      static_cast<unsigned long long>(ledger.pushes),
      static_cast<unsigned long long>(ledger.rejected),
      static_cast<unsigned long long>(ledger.updates),
      static_cast<unsigned long long>(ledger.updates_lost),
      static_cast<unsigned long long>(ledger.restores), static_cast<unsigned long long>(version),
      summary["retrained"]["tasks"].get<unsigned long long>(),
      summary["retrained"]["samples"].get<unsigned long long>());
  EXPECT_EQ(ledger.restores, restores);
  EXPECT_EQ(ledger.updates, ledger.pushes - ledger.rejected) << "asynchronous: a push, an update";
  EXPECT_EQ(version, ledger.updates - ledger.updates_lost);
  EXPECT_EQ(summary["ledger"]["updatesLost"].get<uint64_t>(), ledger.updates_lost);
  // A lost update is a batch whose samples are trained again: a task
  // completed behind the restored checkpoint is re-queued whole, a task in
  // hand is rewound by its worker.
  if (ledger.updates_lost > 0) {
    EXPECT_GE(summary["retrained"]["tasks"].get<uint64_t>() +
                  summary["workers"]["tasksReassigned"].get<uint64_t>(),
              1u)
        << summary.dump(2);
    EXPECT_GE(summary["retrained"]["samples"].get<uint64_t>(), ledger.updates_lost)
        << summary.dump(2);
  }
}

}  // namespace gaptrain
