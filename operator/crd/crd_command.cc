#include "operator/crd/crd_command.h"

#include <algorithm>
#include <cstdio>

#include "operator/crd/trainingjob_crd.h"
#include "services/base/atomic_file.h"
#include "services/base/flag_values.h"

namespace gaptrain {
namespace {

constexpr char kUsage[] =
    "usage: gaptrain crd [-o FILE]\n"
    "Prints the TrainingJob CustomResourceDefinition (kubectl apply -f it once per\n"
    "cluster), generated from the manifest's field tables.\n"
    "  -o FILE   write it to FILE (atomically) instead of stdout\n";

}  // namespace

int CrdCommand(const std::vector<std::string>& args, std::string* out, std::string* err) {
  if (std::find(args.begin(), args.end(), "--help") != args.end() ||
      std::find(args.begin(), args.end(), "-h") != args.end()) {
    *out += kUsage;
    return 0;
  }
  std::string path;
  FlagSet flags;
  flags.String("-o", &path);
  Status s = flags.Parse(args);
  if (!s.ok()) {
    *err += "gaptrain crd: " + s.message() + "\n" + kUsage;
    return 2;
  }
  const std::string yaml = TrainingJobCrdYaml();
  if (path.empty()) {
    *out += yaml;
    return 0;
  }
  s = WriteFileAtomically(path, yaml.data(), yaml.size());
  if (!s.ok()) {
    *err += "gaptrain crd: " + s.message() + "\n";
    return 1;
  }
  return 0;
}

int CrdCommand(const std::vector<std::string>& args) {
  std::string out, err;
  const int code = CrdCommand(args, &out, &err);
  std::fputs(out.c_str(), stdout);
  std::fputs(err.c_str(), stderr);
  return code;
}

}  // namespace gaptrain
