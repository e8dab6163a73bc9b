// CreateJobModel: the model a TrainingJob names (spec.model: a built-in
// network or a TorchScript file), shaped for the dataset a worker loaded.
// The master, the trainers and the evaluator all build theirs this way, so
// their layouts match.

#ifndef GAPTRAIN_SERVICES_LEARN_JOB_MODEL_H_
#define GAPTRAIN_SERVICES_LEARN_JOB_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>

#include "services/api/training_job.h"
#include "services/base/status.h"
#include "services/learn/dataset.h"
#include "services/learn/model.h"

namespace gaptrain {

// The image shape and class count of `data`, or of a split known by its
// headers (DescribeDataset, DescribeJobTrainingSet).
ModelInput ModelInputOf(const Dataset& data);
ModelInput ModelInputOf(const DatasetShape& shape);

// `seed` initialises a built-in model's parameters (a worker overwrites
// them with its first pull).
Status CreateJobModel(const TrainingJob& job, const ModelInput& input, uint64_t seed,
                      std::unique_ptr<Model>* model);

// Moves `model` to `device` ("cpu" or "cuda": ChooseDevice's choice, see
// device.h). A model that cannot run there stays on the CPU, working, with
// a warning that says why. `mirror_on_cpu` (tests): on the CPU, use the
// mirrored mode of a GPU anyway (Model::MirrorOnCpuForTesting). Returns the
// device the model computes on ("cpu", "cuda:0").
std::string PlaceJobModel(Model* model, const std::string& device, bool mirror_on_cpu = false);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_LEARN_JOB_MODEL_H_
