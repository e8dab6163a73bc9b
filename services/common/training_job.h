// TrainingJob: the job manifest (apiVersion gaptrain.io/v1alpha1). One
// schema for `gaptrain run -f`, `gaptrain simulate -f` and
// `kubectl apply -f`; docs/trainingjob.md documents every field.
//
// Parsing is strict: an unknown field, a value of the wrong type or out of
// range is an error whose message starts with the field's path
// ("spec.training.optimizer.momentum: must be in [0, 1), got 1.5").
// `status` is written by the operator and ignored on input.

#ifndef GAPTRAIN_SERVICES_COMMON_TRAINING_JOB_H_
#define GAPTRAIN_SERVICES_COMMON_TRAINING_JOB_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "services/common/status.h"

namespace gaptrain {

struct ModelSpec {
  std::string builtin = "mlp";  // mlp | lenet5 | resnet20
  std::string torchscript;      // path of a scripted module; overrides builtin
};

struct DataSpec {
  std::string format = "mnist-idx";  // mnist-idx | cifar10-bin
  std::string path;                  // directory with the dataset files
  uint64_t shuffle_seed = 1;
};

struct DecaySpec {
  std::string type = "step";  // step | none
  std::vector<double> at_fractions = {0.5, 0.75};
  double factor = 0.1;
};

struct OptimizerSpec {
  double learning_rate = 0.1;
  double momentum = 0.9;
  bool nesterov = false;
  double weight_decay = 1e-4;
  double warmup_epochs = 0;  // linear from lr/N to lr
  DecaySpec decay;
};

struct StalenessSpec {
  // none | staleness-aware | gap-aware | dana-zero | dana-slim |
  // gap-aware-dana | dc-asgd
  std::string rule = "gap-aware";
  std::string gap_source = "snapshot";  // snapshot | echo
  std::string gap_precision = "fp32";   // fp32 | bf16
  bool penalize_weight_decay = true;
  uint64_t max_staleness = 0;           // 0 = unbounded
  double gap_beta = 0.999;
  double gap_epsilon = 1e-8;
  double dc_lambda = 0.04;
  bool dc_adaptive = false;
};

struct SyncSpec {
  uint32_t backup_workers = 0;
};

struct TrainingSpec {
  uint32_t batch_size = 128;    // per worker
  double epochs = 0;            // one of epochs / max_updates is set
  uint64_t max_updates = 0;
  double target_accuracy = 0;   // 0 = none; stop when the evaluator reports it
  uint64_t eval_every_updates = 500;
  OptimizerSpec optimizer;
  std::string mode = "async";   // async | sync
  // Values on the wire for pulled parameters and pushed gradients: fp32 |
  // bf16 (half the bytes; the master keeps θ and its state in fp32).
  std::string wire_type = "fp32";
  StalenessSpec staleness;
  SyncSpec sync;
};

struct WorkersSpec {
  uint32_t replicas = 1;
  uint32_t min_replicas = 0;    // 0 = replicas
  uint32_t max_replicas = 0;    // 0 = replicas
  bool preemptible = false;
  std::string restart_policy = "OnFailure";  // Always | OnFailure | Never | ExitCode
  std::string template_yaml;                 // PodTemplateSpec, passed through
};

struct CheckpointSpec {
  uint32_t interval_seconds = 60;
  uint32_t keep = 3;
  std::string path = "checkpoints";
};

struct MasterSpec {
  CheckpointSpec checkpoint;
  uint32_t update_threads = 0;  // 0: one per CPU the master may use
  std::string template_yaml;
};

struct CoordinatorSpec {
  uint32_t lease_seconds = 10;
  std::string template_yaml;
};

struct RunPolicySpec {
  uint32_t backoff_limit = 3;
  uint64_t active_deadline_seconds = 0;  // 0 = none
  uint64_t ttl_seconds_after_finished = 3600;
  std::string clean_pod_policy = "Running";  // All | Running | None
  bool suspend = false;
};

struct TrainingJob {
  std::string name;
  std::string namespace_name = "default";
  std::map<std::string, std::string> labels;
  ModelSpec model;
  DataSpec data;
  TrainingSpec training;
  WorkersSpec workers;
  MasterSpec master;
  CoordinatorSpec coordinator;
  RunPolicySpec run_policy;
  // The raw `spec.simulation` section (read by `gaptrain simulate` only);
  // empty when absent.
  std::string simulation_yaml;
};

// Parses and validates a manifest. `source` names it in errors ("job.yaml").
Status ParseTrainingJob(const std::string& yaml_text, const std::string& source,
                        TrainingJob* job);
// Reads `path` and parses it.
Status LoadTrainingJob(const std::string& path, TrainingJob* job);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_COMMON_TRAINING_JOB_H_
