// DescribeJobTrainingSet: what the master and the coordinator need to know,
// at start, of the training set a TrainingJob names (spec.data): how many
// samples, and the shape of one, from the files' headers (DescribeDataset)
// or from a service's --train-samples.

#ifndef GAPTRAIN_SERVICES_LEARN_JOB_DATA_H_
#define GAPTRAIN_SERVICES_LEARN_JOB_DATA_H_

#include <cstdint>
#include <string>

#include "services/api/training_job.h"
#include "services/base/status.h"
#include "services/learn/dataset.h"

namespace gaptrain {

// With spec.data.format custom the size is spec.data.trainSamples (or
// --train-samples) and the shape unknown (all zero): the trainers declare
// the model. Otherwise `train_samples` > 0 (the service's --train-samples) is the size, and the
// files are not read: the shape is then the format's (mnist-idx 1x28x28,
// cifar10-bin 3x32x32, 10 classes). Otherwise both come from the train
// split's headers; an error there says that `service` ("the master") reads
// them and that --train-samples stands in for them.
Status DescribeJobTrainingSet(const TrainingJob& job, uint64_t train_samples,
                              const std::string& service, DatasetShape* shape);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_LEARN_JOB_DATA_H_
