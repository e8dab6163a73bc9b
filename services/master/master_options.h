// MasterOptions: how gaptrain-master is started. The job comes from the
// TrainingJob manifest; addresses, secrets and overrides from flags or the
// environment (in Kubernetes: the pod spec and a Secret).

#ifndef GAPTRAIN_SERVICES_MASTER_MASTER_OPTIONS_H_
#define GAPTRAIN_SERVICES_MASTER_MASTER_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "services/base/status.h"
#include "services/net/server_flags.h"

namespace gaptrain {

struct MasterOptions {
  // --job, --listen [0.0.0.0:7070], --http-address, --http-port [9090],
  // the token, TLS and --ports-file.
  ServerFlags server = ServerFlags::Defaults("0.0.0.0:7070", 9090);
  std::string checkpoint_dir;             // --checkpoint-dir: overrides the job's
  uint64_t train_samples = 0;             // --train-samples: else read the dataset
  uint64_t model_seed = 1;                // --model-seed: initial parameters
  // --shard I: which of spec.master.shards ranges of θ this master holds;
  // the checkpoints go to DIR/shard-I when the job has several.
  uint64_t shard = 0;
};

// Parses flags (argv[0] excluded) and $GAPTRAIN_TOKEN. Errors name the
// flag and the reason.
Status ParseMasterFlags(const std::vector<std::string>& args, MasterOptions* options);

// The flags' help text.
std::string MasterUsage();

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_MASTER_MASTER_OPTIONS_H_
