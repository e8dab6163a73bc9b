// Fuzz target: the coordinator's state file (state_file.h) and the restore
// of the snapshot it holds (CoordinatorState::Restore). Input: byte 0 is a
// mode, the rest is the file. With bit 0 of the mode set the length and
// CRC fields are recomputed first, so that the fuzzer reaches the snapshot
// behind the checksum. Contract:
//   - a torn, corrupt or foreign file is DATA_LOSS with a message, and the
//     caller's snapshot is left as it was;
//   - a snapshot that does not fit the job is FAILED_PRECONDITION, one that
//     is inconsistent DATA_LOSS, never a crash;
//   - a restored state serves every call (register, heartbeat, take and
//     complete tasks, leave, describe) with a Status, and saves to a
//     snapshot that restores to the same snapshot again.

#include <zlib.h>

#include <google/protobuf/stubs/logging.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "proto/gaptrain.pb.h"
#include "services/coordinator/coordinator_state.h"
#include "services/coordinator/state_file.h"
#include "services/testing/fuzz_contract.h"

namespace gaptrain {
namespace {

// The job of the seed corpus (state_file_fuzzer_corpus/): 1000 samples in
// tasks of 100, two epochs, two trainers.
CoordinatorConfig SeedJob() {
  CoordinatorConfig c;
  c.job_name = "fuzz-job";
  c.train_samples = 1000;
  c.samples_per_task = 100;
  c.batch_size = 10;
  c.epochs = 2;
  c.min_trainers = 2;
  c.lease_seconds = 10;
  return c;
}

// Drives a restored state through every call a worker can make.
void Exercise(CoordinatorState* state, double now) {
  state->Describe(now);
  for (WorkerId id : state->Members()) {
    uint64_t held = 0;
    WorkerProgress progress;
    progress.samples_done = 1;
    state->Heartbeat(now, id, progress, &held);
    NextTaskResult next;
    if (state->NextTask(now, id, &next).ok() && next.outcome == TaskOutcome::kAssigned) {
      CompleteTaskResult done;
      state->CompleteTask(now, id, next.task.id, &done);
    }
    if (held != 0) {
      CompleteTaskResult done;
      state->CompleteTask(now, id, held, &done);
    }
    state->ReportEvaluation(now, id, 0.5, 1.0, 1);
  }
  RegisterResult joined;
  if (state->Register(now, "fuzz-host", WorkerRole::kTrainer, 0, &joined).ok()) {
    NextTaskResult next;
    state->NextTask(now, joined.id, &next);
    bool gone = false;
    state->Leave(now, joined.id, LeaveReason::kPreempted, &gone);
  }
  state->Describe(now + 1000);
}

}  // namespace
}  // namespace gaptrain

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gaptrain;
  // Protobuf logs every invalid UTF-8 string it meets; rejections are
  // checked here, not read from logs.
  static const google::protobuf::LogSilencer quiet;
  if (size == 0) return 0;
  std::string file(reinterpret_cast<const char*>(data) + 1, size - 1);
  constexpr size_t kHeader = 16;  // magic, length, CRC
  if ((data[0] & 1) != 0 && file.size() >= kHeader) {
    const uint32_t length = static_cast<uint32_t>(file.size() - kHeader);
    const uint32_t crc = static_cast<uint32_t>(
        crc32_z(0, reinterpret_cast<const Bytef*>(file.data()) + kHeader, length));
    std::memcpy(&file[8], &length, sizeof length);  // little-endian, as the format
    std::memcpy(&file[12], &crc, sizeof crc);
  }
  const std::string path = FuzzScratchPath(kStateFileName);
  FuzzWriteFile(path, file.data(), file.size());

  proto::CoordinatorSnapshot snapshot;
  snapshot.set_job_name("unchanged");
  const std::string before = snapshot.SerializeAsString();
  Status read = ReadStateFile(path, &snapshot);
  if (!read.ok()) {
    FuzzExpectRejection(read, {Status::Code::kDataLoss}, "ReadStateFile");
    FuzzExpect(snapshot.SerializeAsString() == before,
               "ReadStateFile changed the snapshot on rejection");
    return 0;
  }

  const CoordinatorConfig config = SeedJob();
  const double now = 5000;
  std::unique_ptr<CoordinatorState> state;
  Status restored = CoordinatorState::Restore(config, snapshot, now, &state);
  if (!restored.ok()) {
    FuzzExpectRejection(restored, {Status::Code::kFailedPrecondition, Status::Code::kDataLoss},
                        "CoordinatorState::Restore");
    FuzzExpect(state == nullptr, "Restore handed out a state on rejection");
    return 0;
  }
  FuzzExpect(state != nullptr, "Restore succeeded without a state");

  // Saved and restored again, a state is the same state.
  proto::CoordinatorSnapshot saved;
  state->Save(&saved);
  std::unique_ptr<CoordinatorState> again;
  Status reread = CoordinatorState::Restore(config, saved, now, &again);
  FuzzExpect(reread.ok(), "a saved state does not restore: " + reread.ToString());
  proto::CoordinatorSnapshot saved_again;
  again->Save(&saved_again);
  FuzzExpect(saved.SerializeAsString() == saved_again.SerializeAsString(),
             "save -> restore -> save changed the snapshot");

  Exercise(state.get(), now);
  proto::CoordinatorSnapshot after;
  state->Save(&after);
  std::unique_ptr<CoordinatorState> after_restore;
  Status after_status = CoordinatorState::Restore(config, after, now + 1, &after_restore);
  FuzzExpect(after_status.ok(),
             "the state saved after serving calls does not restore: " + after_status.ToString());
  return 0;
}
