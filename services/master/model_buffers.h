// ModelBuffers: the master's copy of the module's buffers (BatchNorm's
// running statistics and any other registered buffer), which the trainers
// send every few pushes and the evaluator, the checkpoints and `gaptrain
// export` read. Parameters are trained; buffers are not: the master folds
// what trainers send into one value (MergeBufferValues): floating buffers
// move towards each send by 1/N, N the live trainers (at least 1), an
// exponential average that follows the trainers' own statistics; a batch
// count keeps the largest; the first send ever is taken as it is.
//
// What callers may rely on: values are always whole (a read never sees a
// half-merged send); a send of the wrong size, or with a NaN or an infinity
// in a floating buffer, is refused (INVALID_ARGUMENT naming the buffer)
// and changes nothing. Thread-safe.

#ifndef GAPTRAIN_SERVICES_MASTER_MODEL_BUFFERS_H_
#define GAPTRAIN_SERVICES_MASTER_MODEL_BUFFERS_H_

#include <cstdint>
#include <mutex>
#include <string>

#include "services/base/status.h"
#include "services/engine/buffer_layout.h"

namespace gaptrain {

class ModelBuffers {
 public:
  // `values`: layout.bytes() bytes (the model's initial buffers, or a
  // checkpoint's); `merges`: how many sends they already hold.
  ModelBuffers(BufferLayout layout, std::string values, uint64_t merges = 0);

  const BufferLayout& layout() const { return layout_; }

  // Folds one trainer's packed values in, `trainers` live; *merges
  // (optional) is the count after it.
  Status Merge(const std::string& values, size_t trainers, uint64_t* merges = nullptr);

  // The current values and how many sends they hold (0: the initial ones).
  void Read(std::string* values, uint64_t* merges) const;

 private:
  const BufferLayout layout_;
  mutable std::mutex mu_;
  std::string values_;  // guarded by mu_
  uint64_t merges_;     // guarded by mu_
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_MASTER_MODEL_BUFFERS_H_
