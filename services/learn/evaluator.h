// EvaluateModel: accuracy and mean cross-entropy of a Model over a whole
// dataset split, in evaluation mode (BatchNorm uses its running statistics).

#ifndef GAPTRAIN_SERVICES_LEARN_EVALUATOR_H_
#define GAPTRAIN_SERVICES_LEARN_EVALUATOR_H_

#include <cstdint>

#include "services/base/status.h"
#include "services/learn/dataset.h"
#include "services/learn/model.h"

namespace gaptrain {

struct EvalResult {
  double accuracy = 0;  // correct / samples, in [0, 1]
  double loss = 0;      // mean cross-entropy per sample
  int64_t samples = 0;
};

// Evaluates every sample of `test` in order, `batch_size` at a time (the
// last batch may be shorter), with one pair of batch buffers allocated per
// call. Fails, leaving *result zeroed, when batch_size < 1, the dataset is
// empty, or its image shape or class count does not match model->input().
// A LibTorch failure inside the model shows as a NaN loss.
Status EvaluateModel(Model* model, const Dataset& test, int64_t batch_size, EvalResult* result);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_LEARN_EVALUATOR_H_
