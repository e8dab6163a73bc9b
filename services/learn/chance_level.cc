#include "services/learn/chance_level.h"

#include <cmath>

namespace gaptrain {

bool AtChanceLevel(double accuracy, double loss, int num_classes) {
  if (num_classes < 2 || !std::isfinite(accuracy) || !std::isfinite(loss)) return false;
  const double uniform = std::log(static_cast<double>(num_classes));
  return std::fabs(loss - uniform) <= 0.02 * uniform && accuracy <= 2.0 / num_classes;
}

const char* ChanceLevelAdvice() {
  return "the model predicts no better than chance (loss ~ ln of the number of classes): "
         "training diverged early, which a learning rate too high for this many "
         "asynchronous workers does; lower spec.training.optimizer.learningRate "
         "(docs/run.md, Examples)";
}

}  // namespace gaptrain
