#include "services/master/push_ledger.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "services/testing/test_files.h"

namespace gaptrain {
namespace {

std::string LedgerPath() { return TestDir("ledger") + "/" + PushLedger::kFileName; }

// The updates applied, lost to restores and the restores themselves, and the
// identity the chaos test checks: the version is what was applied less what
// was lost.
void ExpectUpdates(const PushLedger::Totals& t, uint64_t updates, uint64_t updates_lost,
                   uint64_t restores) {
  EXPECT_EQ(t.updates, updates);
  EXPECT_EQ(t.updates_lost, updates_lost);
  EXPECT_EQ(t.restores, restores);
  EXPECT_EQ(t.version, t.updates - t.updates_lost);
}

TEST(PushLedgerTest, CountsPushesAcrossRunsAndTheUpdatesARestartLost) {
  const std::string path = LedgerPath();
  std::remove(path.c_str());
  {
    std::unique_ptr<PushLedger> ledger;
    ASSERT_TRUE(PushLedger::Open(path, &ledger).ok());
    ledger->BeginRun(100, 0);  // a fresh job
    for (uint64_t v = 1; v <= 30; ++v) ledger->RecordAccepted(v);
    ledger->RecordRejected();
    ledger->RecordRejected();
  }
  {
    // The next run resumed from the checkpoint at 20: 10 updates lost.
    std::unique_ptr<PushLedger> ledger;
    ASSERT_TRUE(PushLedger::Open(path, &ledger).ok());
    EXPECT_EQ(ledger->totals().last_run, 100u);
    ledger->BeginRun(200, 20);
    for (uint64_t v = 21; v <= 25; ++v) ledger->RecordAccepted(v);
    ledger->RecordVersion(26);  // a sync step completed by a leave
  }
  PushLedger::Totals t;
  ASSERT_TRUE(PushLedger::Read(path, &t).ok());
  EXPECT_EQ(t.runs, 2u);
  EXPECT_EQ(t.last_run, 200u);
  EXPECT_EQ(t.version, 26u);
  EXPECT_EQ(t.pushes, 37u);
  EXPECT_EQ(t.rejected, 2u);
  ExpectUpdates(t, 36, 10, 1);
}

TEST(PushLedgerTest, ANewLedgerBesideAnOldCheckpointCountsItsUpdatesAsApplied) {
  const std::string path = LedgerPath();
  std::remove(path.c_str());
  std::unique_ptr<PushLedger> ledger;
  ASSERT_TRUE(PushLedger::Open(path, &ledger).ok());
  ledger->BeginRun(7, 500);
  ledger->RecordAccepted(501);
  ExpectUpdates(ledger->totals(), 501, 0, 0);
}

TEST(PushLedgerTest, SurvivesAProcessKilledBySigkill) {
  const std::string path = LedgerPath();
  std::remove(path.c_str());
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::unique_ptr<PushLedger> ledger;
    if (!PushLedger::Open(path, &ledger).ok()) _exit(1);
    ledger->BeginRun(1, 0);
    for (uint64_t v = 1; v <= 1000; ++v) ledger->RecordAccepted(v);
    raise(SIGKILL);  // no destructor, no msync
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  PushLedger::Totals t;
  ASSERT_TRUE(PushLedger::Read(path, &t).ok());
  EXPECT_EQ(t.version, 1000u);
  EXPECT_EQ(t.pushes, 1000u);
}

TEST(PushLedgerTest, RefusesAFileThatIsNotALedger) {
  const std::string path = LedgerPath();
  WriteRaw(path, "not a ledger");
  std::unique_ptr<PushLedger> ledger;
  Status s = PushLedger::Open(path, &ledger);
  EXPECT_EQ(s.code(), Status::Code::kDataLoss) << s.ToString();
  EXPECT_NE(s.message().find(path), std::string::npos);
  PushLedger::Totals t;
  EXPECT_EQ(PushLedger::Read(path, &t).code(), Status::Code::kDataLoss);
  WriteRaw(path, std::string(4096, 'x'));
  EXPECT_EQ(PushLedger::Open(path, &ledger).code(), Status::Code::kDataLoss);
  EXPECT_EQ(ReadRaw(path), std::string(4096, 'x')) << "a refused file is never written";
  EXPECT_EQ(PushLedger::Read(TestDir("ledger") + "/missing", &t).code(),
            Status::Code::kNotFound);
}

}  // namespace
}  // namespace gaptrain
