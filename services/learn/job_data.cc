#include "services/learn/job_data.h"

namespace gaptrain {

Status DescribeJobTrainingSet(const TrainingJob& job, uint64_t train_samples,
                              const std::string& service, DatasetShape* shape) {
  if (job.data.ReadByTrainers()) {  // the trainers' code reads it: its size is the job's
    *shape = DatasetShape();
    shape->samples = train_samples > 0 ? train_samples : job.data.train_samples;
    return Status::OK();
  }
  DatasetFormat format;
  GAPTRAIN_RETURN_IF_ERROR(ParseDatasetFormat(job.data.format, &format));
  if (train_samples > 0) {
    *shape = DatasetShape();
    shape->samples = train_samples;
    const bool cifar = format == DatasetFormat::kCifar10Bin;
    shape->channels = cifar ? 3 : 1;
    shape->height = shape->width = cifar ? 32 : 28;
    return Status::OK();
  }
  Status s = DescribeDataset(format, job.data.path, Split::kTrain, shape);
  if (!s.ok()) {
    return Status(s.code(), s.message() + " (" + service +
                                " reads the training set's size and shape from its headers; "
                                "or pass --train-samples)");
  }
  return Status::OK();
}

}  // namespace gaptrain
