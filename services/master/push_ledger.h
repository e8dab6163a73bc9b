// PushLedger: the job's push accounting across every run of its master,
// in a small file beside the checkpoints (<checkpoint dir>/push-ledger.bin)
// that survives the master's death. A restarted master resumes from its
// newest checkpoint at version V and loses the updates it had applied
// after V; the metrics of the dead run are gone, but the ledger still
// holds the version it had reached, so the new run counts exactly what
// was lost. The launcher and tests read the file to check that every push
// is accounted for: final version = updates - lost, and, asynchronously,
// updates = pushes - rejected.
//
// The file is memory-mapped and updated in place with 8-byte atomic
// stores, a few nanoseconds per push: a process killed by any signal
// leaves its last values in the page cache, which the kernel writes back.
// A machine that loses power may lose the last seconds of counts (the
// kernel's write-back period), so after such a crash the lost updates are
// a lower bound.
//
// Layout (little-endian, 4096 bytes): magic "GTLEDGR1", format version 1,
// then the Totals fields as uint64 in declaration order. A file with
// another magic, format or size is refused (DATA_LOSS) and never written.
//
// Thread-safe: the counters are atomics; BeginRun once, before serving.

#ifndef GAPTRAIN_SERVICES_MASTER_PUSH_LEDGER_H_
#define GAPTRAIN_SERVICES_MASTER_PUSH_LEDGER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "services/base/status.h"

namespace gaptrain {

class PushLedger {
 public:
  static constexpr char kFileName[] = "push-ledger.bin";

  struct Totals {
    uint64_t runs = 0;          // master starts
    uint64_t last_run = 0;      // the newest run's incarnation id
    uint64_t version = 0;       // the newest run's version, after its last update
    uint64_t pushes = 0;        // push streams answered: accepted + rejected
    uint64_t rejected = 0;      // refused, for any reason (incomplete included)
    uint64_t updates = 0;       // version increments applied, in every run
    uint64_t updates_lost = 0;  // applied, then lost when a run resumed from an older version
    uint64_t restores = 0;      // runs that followed an earlier one
  };

  // Maps `path`, creating it (zeroed) when missing. DATA_LOSS for a file
  // that is not a ledger; OS errors as OsError codes them.
  static Status Open(const std::string& path, std::unique_ptr<PushLedger>* ledger);
  // The totals in `path` without mapping it for writing.
  static Status Read(const std::string& path, Totals* totals);

  ~PushLedger();
  PushLedger(const PushLedger&) = delete;
  PushLedger& operator=(const PushLedger&) = delete;

  // A new run `incarnation` starts at `version` (its checkpoint's, or 0).
  // The previous run's updates after `version` are counted as lost; a
  // version above the previous run's (its checkpoint is newer than its
  // last recorded update: the ledger was new or replaced) is taken as it
  // is: the updates before it are counted as applied.
  void BeginRun(uint64_t incarnation, uint64_t version);

  // A push answered: accepted (and the engine's version after it) or
  // refused.
  void RecordAccepted(uint64_t version) { RecordVersion(version, /*push=*/true); }
  void RecordRejected();
  // The version moved without a push (a sync step completed by a leave).
  void RecordVersion(uint64_t version) { RecordVersion(version, /*push=*/false); }

  Totals totals() const;

 private:
  struct Fields;
  PushLedger(void* mapping, Fields* fields) : mapping_(mapping), fields_(fields) {}
  void RecordVersion(uint64_t version, bool push);

  void* mapping_;
  Fields* fields_;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_MASTER_PUSH_LEDGER_H_
