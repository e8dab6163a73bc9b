#include "services/worker/job_model.h"

namespace gaptrain {

ModelInput ModelInputOf(const Dataset& data) {
  return ModelInput{data.channels, data.height, data.width, data.num_classes};
}

Status CreateJobModel(const TrainingJob& job, const ModelInput& input, uint64_t seed,
                      std::unique_ptr<Model>* model) {
  if (!job.model.torchscript.empty()) {
    return Model::LoadTorchScript(job.model.torchscript, input, model);
  }
  return Model::CreateBuiltin(job.model.builtin, input, seed, model);
}

}  // namespace gaptrain
