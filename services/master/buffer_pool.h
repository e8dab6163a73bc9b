// BufferPool: model-sized float buffers reused across RPCs, so a pull or a
// push of 100 MB does not allocate (and fault in) fresh pages each time. A
// buffer goes back to the pool when its last shared_ptr is dropped: by the
// RPC, or by gRPC once the slices that point into it are sent. The pool
// may be destroyed before its buffers; they are then simply freed.

#ifndef GAPTRAIN_SERVICES_MASTER_BUFFER_POOL_H_
#define GAPTRAIN_SERVICES_MASTER_BUFFER_POOL_H_

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace gaptrain {

class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  // Buffers of `values` floats; at most `max_idle` are kept when unused.
  static std::shared_ptr<BufferPool> Create(size_t values, size_t max_idle = 8);

  // A buffer of values() floats with unspecified contents.
  std::shared_ptr<std::vector<float>> Acquire();

  size_t values() const { return values_; }

 private:
  BufferPool(size_t values, size_t max_idle) : values_(values), max_idle_(max_idle) {}
  void Release(std::vector<float>* buffer);

  const size_t values_;
  const size_t max_idle_;
  std::mutex mu_;
  std::vector<std::unique_ptr<std::vector<float>>> idle_;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_MASTER_BUFFER_POOL_H_
