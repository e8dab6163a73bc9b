#include "services/testing/tiny_mlp_store.h"

#include <gtest/gtest.h>

#include <cmath>
#include <utility>

namespace gaptrain {

std::unique_ptr<ParameterStore> TinyMlpStore(uint64_t version, float seed) {
  ParameterLayout layout;
  EXPECT_TRUE(layout.Add("fc1.weight", {4, 3}).ok());
  EXPECT_TRUE(layout.Add("fc1.bias", {4}).ok());
  EXPECT_TRUE(layout.Add("fc2.weight", {2, 4}).ok());
  EXPECT_TRUE(layout.Add("fc2.bias", {2}).ok());
  auto store = std::make_unique<ParameterStore>(std::move(layout));
  for (size_t i = 0; i < store->size(); ++i) {
    store->params()[i] = std::sin(seed + 0.7f * i) * (i % 3 == 0 ? -1.5f : 0.8f);
  }
  store->AddBuffer("momentum", DType::kFloat32)->Fill(42.0f);
  store->set_version(version);
  return store;
}

}  // namespace gaptrain
