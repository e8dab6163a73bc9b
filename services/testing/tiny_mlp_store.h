#ifndef GAPTRAIN_SERVICES_TESTING_TINY_MLP_STORE_H_
#define GAPTRAIN_SERVICES_TESTING_TINY_MLP_STORE_H_

#include <cstdint>
#include <memory>

#include "services/engine/parameter_store.h"

namespace gaptrain {

// A master's store of a tiny MLP for tests of checkpoints and exports:
// fc1 Linear(3, 4) and fc2 Linear(4, 2) as torch.nn names them (P = 26),
// at `version`, plus a "momentum" buffer of 42s (a rule's state, never
// exported). The values depend on `seed`, with full mantissas and both
// signs, so only an exact copy matches and stores of other seeds differ
// everywhere.
std::unique_ptr<ParameterStore> TinyMlpStore(uint64_t version, float seed);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_TESTING_TINY_MLP_STORE_H_
