#include "services/learn/job_model.h"

#include <spdlog/spdlog.h>

namespace gaptrain {

ModelInput ModelInputOf(const Dataset& data) {
  return ModelInput{data.channels, data.height, data.width, data.num_classes};
}

ModelInput ModelInputOf(const DatasetShape& shape) {
  return ModelInput{shape.channels, shape.height, shape.width, shape.num_classes};
}

Status CreateJobModel(const TrainingJob& job, const ModelInput& input, uint64_t seed,
                      std::unique_ptr<Model>* model) {
  if (job.model.from_trainer) return Status::FailedPrecondition(kNoModelFromTrainer);
  if (!job.model.torchscript.empty()) {
    return Model::LoadTorchScript(job.model.torchscript, input, model);
  }
  return Model::CreateBuiltin(job.model.builtin, input, seed, model);
}

std::string PlaceJobModel(Model* model, const std::string& device, bool mirror_on_cpu) {
  if (device != "cpu") {
    Status s = model->MoveTo(device);
    if (!s.ok()) spdlog::warn("--device {}: {}; computing on the CPU", device, s.message());
  } else if (mirror_on_cpu) {
    Status s = model->MirrorOnCpuForTesting();
    if (!s.ok()) spdlog::warn("mirroring on the CPU: {}", s.message());
  }
  return model->device();
}

}  // namespace gaptrain
