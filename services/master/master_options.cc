#include "services/master/master_options.h"

#include "services/base/flag_values.h"

namespace gaptrain {

std::string MasterUsage() {
  return "usage: gaptrain-master --job JOB.yaml [flags]\n" +
         ServerFlagsUsage(MasterOptions().server, "/metrics and /healthz") +
         "  --checkpoint-dir DIR     overrides spec.master.checkpoint.path\n"
         "  --train-samples N        training-set size (else read from spec.data)\n"
         "  --model-seed N           seed of the initial parameters [1]\n"
         "  --shard I                the range of θ this master holds, of spec.master.shards "
         "[0]\n";
}

Status ParseMasterFlags(const std::vector<std::string>& args, MasterOptions* options) {
  MasterOptions o;
  std::string token_file;
  FlagSet flags;
  AddServerFlags(&flags, &o.server, &token_file);
  flags.String("--checkpoint-dir", &o.checkpoint_dir);
  flags.Unsigned("--train-samples", 0, UINT32_MAX, &o.train_samples);
  flags.Unsigned("--model-seed", 0, UINT64_MAX, &o.model_seed);
  flags.Unsigned("--shard", 0, 63, &o.shard);
  GAPTRAIN_RETURN_IF_ERROR(flags.Parse(args));
  GAPTRAIN_RETURN_IF_ERROR(FinishServerFlags(token_file, &o.server));
  *options = o;
  return Status::OK();
}

}  // namespace gaptrain
