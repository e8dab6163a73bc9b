#include "services/learn/evaluator.h"

#include <numeric>
#include <string>
#include <vector>

#include "services/learn/batch_loader.h"
#include "services/learn/epoch_order.h"

namespace gaptrain {
namespace {

std::string Shape(int64_t c, int64_t h, int64_t w) {
  return "[" + std::to_string(c) + ", " + std::to_string(h) + ", " + std::to_string(w) + "]";
}

}  // namespace

Status EvaluateModel(Model* model, const Dataset& test, int64_t batch_size, EvalResult* result) {
  *result = EvalResult();
  if (batch_size < 1) {
    return Status::InvalidArgument("evaluation batch_size " + std::to_string(batch_size) +
                                   " must be at least 1");
  }
  const ModelInput& in = model->input();
  if (test.channels != in.channels || test.height != in.height || test.width != in.width) {
    return Status::InvalidArgument("evaluation dataset images are " +
                                   Shape(test.channels, test.height, test.width) +
                                   ", the model takes " +
                                   Shape(in.channels, in.height, in.width));
  }
  if (test.num_classes != in.num_classes) {
    return Status::InvalidArgument("evaluation dataset has " + std::to_string(test.num_classes) +
                                   " classes, the model " + std::to_string(in.num_classes));
  }
  if (test.size() == 0) return Status::InvalidArgument("evaluation dataset is empty");
  if (test.mean.size() != static_cast<size_t>(test.channels) ||
      test.stddev.size() != static_cast<size_t>(test.channels)) {
    return Status::InvalidArgument("evaluation dataset has no per-channel mean and stddev");
  }

  const BatchLoader loader(test, batch_size);
  std::vector<uint32_t> order(test.size());
  std::iota(order.begin(), order.end(), 0u);
  BatchIterator it(loader, order, SampleRange{0, static_cast<uint32_t>(order.size())});
  std::vector<float> images(loader.images_buffer_size());
  std::vector<int64_t> labels(loader.labels_buffer_size());

  double loss_sum = 0;
  int64_t correct = 0;
  int64_t samples = 0;
  while (size_t n = it.Next(images.data(), labels.data())) {
    model->Evaluate(images.data(), labels.data(), static_cast<int64_t>(n), &loss_sum, &correct);
    samples += static_cast<int64_t>(n);
  }
  GAPTRAIN_RETURN_IF_ERROR(it.status());
  result->samples = samples;
  result->accuracy = static_cast<double>(correct) / static_cast<double>(samples);
  result->loss = loss_sum / static_cast<double>(samples);
  return Status::OK();
}

}  // namespace gaptrain
