// ParameterStore: everything the master holds for one model: the parameters θ
// as one flat float32 buffer with its layout, the version counter t (one
// increment per applied update), and the named state the update rule keeps
// (momentum, the running mean of squared steps, per-worker snapshots or
// momenta) with a few named scalars (update counts, η_max).
//
// Keeping the rule's state here, by name, lets checkpoints save and restore
// any rule without knowing it, and gives one place to account for memory.
// Not thread-safe: the owner (UpdateEngine, then the master service)
// serialises access.

#ifndef GAPTRAIN_SERVICES_ENGINE_PARAMETER_STORE_H_
#define GAPTRAIN_SERVICES_ENGINE_PARAMETER_STORE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "services/engine/flat_buffer.h"
#include "services/engine/parameter_layout.h"

namespace gaptrain {

using WorkerId = uint32_t;

// The store name of a per-worker buffer: WorkerStateName(3, "copy") is
// "worker/3/copy".
std::string WorkerStateName(WorkerId worker, const char* what);

class ParameterStore {
 public:
  explicit ParameterStore(ParameterLayout layout);

  ParameterStore(const ParameterStore&) = delete;
  ParameterStore& operator=(const ParameterStore&) = delete;

  // A deep copy: taken under the owner's lock, written to disk without it.
  std::unique_ptr<ParameterStore> Clone() const;

  const ParameterLayout& layout() const { return layout_; }
  size_t size() const { return layout_.size(); }  // P

  float* params() { return params_.f32(); }
  const float* params() const { return params_.f32(); }

  uint64_t version() const { return version_; }
  void set_version(uint64_t v) { version_ = v; }

  // Adds a zero-filled state buffer of P elements, replacing any of that name.
  FlatBuffer* AddBuffer(const std::string& name, DType dtype);
  // nullptr when absent.
  FlatBuffer* buffer(const std::string& name);
  const FlatBuffer* buffer(const std::string& name) const;
  void RemoveBuffer(const std::string& name);
  const std::map<std::string, FlatBuffer>& buffers() const { return buffers_; }

  // Named scalars of the rule; an absent scalar reads as 0.
  double scalar(const std::string& name) const;
  void set_scalar(const std::string& name, double value) { scalars_[name] = value; }
  const std::map<std::string, double>& scalars() const { return scalars_; }

  // Bytes of parameters plus all state buffers (the P-proportional memory;
  // the scalars and map nodes are negligible and not counted).
  size_t MemoryBytes() const;

 private:
  ParameterLayout layout_;
  FlatBuffer params_;
  uint64_t version_ = 0;
  std::map<std::string, FlatBuffer> buffers_;
  std::map<std::string, double> scalars_;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_ENGINE_PARAMETER_STORE_H_
