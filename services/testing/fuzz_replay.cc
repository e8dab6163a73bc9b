#include "services/testing/fuzz_replay.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>

#include "services/base/file_contents.h"
#include "services/testing/fuzz_contract.h"

namespace gaptrain {

Status ListFuzzInputs(const std::vector<std::string>& paths, std::vector<std::string>* files) {
  namespace fs = std::filesystem;
  std::vector<std::string> found;
  for (const std::string& path : paths) {
    std::error_code ec;
    if (fs::is_regular_file(path, ec)) {
      found.push_back(path);
      continue;
    }
    if (!fs::is_directory(path, ec)) return Status::NotFound(path + ": no such file or folder");
    for (fs::recursive_directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->is_regular_file(ec)) found.push_back(it->path().string());
    }
    if (ec) return Status::Unavailable(path + ": " + ec.message());
  }
  std::sort(found.begin(), found.end());
  *files = std::move(found);
  return Status::OK();
}

Status ReplayFuzzInput(const std::string& file) {
  std::string bytes;
  GAPTRAIN_RETURN_IF_ERROR(ReadFile(file, &bytes));
  // Exactly the input's size, as libFuzzer allocates it.
  std::unique_ptr<uint8_t[]> exact(new uint8_t[bytes.size()]);
  std::copy(bytes.begin(), bytes.end(), exact.get());
  LLVMFuzzerTestOneInput(exact.get(), bytes.size());
  return Status::OK();
}

}  // namespace gaptrain
