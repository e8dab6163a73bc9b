// How long a worker takes to load MNIST's train split: inflating the gzip
// files as every worker did, against reading the inflated copy that the
// first worker left in the data cache (services/learn/inflated_cache.h).
// One process, one thread, the worker's heap policy; medians of 7 rounds.
//
//   bazel build -c opt //bench:data_load_bench && bazel-bin/bench/data_load_bench
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "services/base/heap_policy.h"
#include "services/learn/dataset.h"
#include "services/learn/inflated_cache.h"
#include "services/testing/testdata_dir.h"

namespace {

double MedianSeconds(int rounds, const std::function<void()>& run) {
  std::vector<double> seconds;
  for (int i = 0; i < rounds; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

}  // namespace

int main() {
  gaptrain::UseTrainingHeapPolicy();
  std::string data;
  gaptrain::Status found = gaptrain::FindSharedDataDir(&data);
  if (!found.ok()) {
    std::fprintf(stderr, "%s\n", found.ToString().c_str());
    return 1;
  }
  data += "/mnist";
  char cache_template[] = "/tmp/data_load_bench.XXXXXX";
  const std::string cache = ::mkdtemp(cache_template);
  constexpr int kRounds = 7;
  bool ok = true;

  gaptrain::Dataset dataset;
  gaptrain::DatasetCacheUse use;
  const double inflate = MedianSeconds(kRounds, [&] {
    ok &= gaptrain::LoadDataset(gaptrain::DatasetFormat::kMnistIdx, data, gaptrain::Split::kTrain,
                                &dataset).ok();
  });
  ok &= gaptrain::LoadDataset(gaptrain::DatasetFormat::kMnistIdx, data, gaptrain::Split::kTrain,
                              cache, &dataset, &use).ok();  // fills the cache
  const double cached = MedianSeconds(kRounds, [&] {
    ok &= gaptrain::LoadDataset(gaptrain::DatasetFormat::kMnistIdx, data, gaptrain::Split::kTrain,
                                cache, &dataset, &use).ok();
    ok &= use.files_from_cache == 1;
  });
  // The parts of a cache hit: reading the copy, and its CRC.
  std::vector<uint8_t> bytes;
  gaptrain::InflatedCacheOutcome outcome;
  const double read_copy = MedianSeconds(kRounds, [&] {
    ok &= gaptrain::ReadFileInflatedCached(data + "/train-images-idx3-ubyte.gz", cache, &bytes,
                                           &outcome).ok();
  });
  volatile uLong sink = 0;
  const double crc = MedianSeconds(kRounds, [&] { sink = crc32_z(0, bytes.data(), bytes.size()); });
  const std::string rm = "rm -rf " + cache;
  if (std::system(rm.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", cache.c_str());
  if (!ok) {
    std::fprintf(stderr, "a load failed\n");
    return 1;
  }
  std::printf("MNIST train split, %zu images, median of %d rounds\n", dataset.size(), kRounds);
  std::printf("  inflating the gzip files:        %.3f s\n", inflate);
  std::printf("  from the data cache:             %.3f s (copy read %.3f s, of which CRC-32 %.3f s)\n",
              cached, read_copy, crc);
  std::printf("ratio inflate / cached: %.1f\n", inflate / cached);
  return 0;
}
