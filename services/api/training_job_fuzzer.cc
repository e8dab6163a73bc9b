// Fuzz target: the TrainingJob manifest parser (training_job.h), YAML and
// the API server's JSON alike. Contract:
//   - a bad manifest is INVALID_ARGUMENT whose message starts with the
//     source's name, never a crash or an exception across the API (yaml-cpp
//     throws; nesting, aliases and odd scalars are the parser's to handle);
//   - on rejection the caller's TrainingJob is left as it was;
//   - an accepted job is within every documented limit, and checking it
//     against a training set returns a Status.

#include <cstdint>
#include <string>

#include "services/api/training_job.h"
#include "services/testing/fuzz_contract.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gaptrain;
  const std::string text(reinterpret_cast<const char*>(data), size);
  TrainingJob job;
  job.name = "unchanged";
  job.workers.replicas = 7;
  Status parsed = ParseTrainingJob(text, "fuzz.yaml", &job);
  if (!parsed.ok()) {
    FuzzExpectRejection(parsed, {Status::Code::kInvalidArgument}, "ParseTrainingJob");
    FuzzExpect(parsed.message().rfind("fuzz.yaml: ", 0) == 0,
               "the error does not name the source: " + parsed.message());
    FuzzExpect(job.name == "unchanged" && job.workers.replicas == 7,
               "ParseTrainingJob changed the job on rejection");
    return 0;
  }
  FuzzExpect(!job.name.empty() && job.name.size() <= 253, "metadata.name out of range");
  FuzzExpect(job.workers.replicas >= 1 && job.workers.replicas <= 1024,
             "spec.workers.replicas out of range");
  FuzzExpect(job.workers.min_replicas <= 1024 && job.workers.max_replicas <= 1024,
             "spec.workers.min/maxReplicas out of range");
  FuzzExpect(job.training.batch_size >= 1 && job.training.batch_size <= 65536,
             "spec.training.batchSize out of range");
  const bool by_epochs = job.training.epochs > 0 && job.training.epochs <= 1e6;
  const bool by_updates = job.training.max_updates >= 1 && job.training.max_updates <= 1e15;
  FuzzExpect(by_epochs || by_updates, "accepted a job without a length in range");
  for (uint64_t samples : {uint64_t{1}, uint64_t{60000}, (uint64_t{1} << 32) - 1}) {
    Status fits = CheckJobAgainstData(job, samples);
    if (!fits.ok()) {
      FuzzExpectRejection(fits, {Status::Code::kInvalidArgument, Status::Code::kFailedPrecondition},
                          "CheckJobAgainstData");
    }
  }
  return 0;
}
