// YamlFields: strict reading of one YAML mapping of a manifest. Each Read
// leaves the target unchanged when the key is absent, converts the value
// with a clear error ("spec.training.batchSize: must be a non-negative
// integer, got 'lots'"), and Finish() rejects keys nobody read, listing the
// known ones. The first error wins and is kept in the caller's Status, so a
// whole section reads as a flat list of Read calls.

#ifndef GAPTRAIN_SERVICES_API_YAML_FIELDS_H_
#define GAPTRAIN_SERVICES_API_YAML_FIELDS_H_

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "services/base/status.h"

namespace gaptrain {

class YamlFields {
 public:
  // `node` may be undefined or null (an absent section: every Read is a
  // no-op). `path` is the mapping's dotted path, "" for the document root.
  YamlFields(const YAML::Node& node, std::string path, Status* status);

  std::string PathOf(const std::string& key) const;

  // Whether `key` is present with a non-null value (does not count as
  // reading it).
  bool Has(const std::string& key) const;

  // The sub-mapping `key`; an undefined node when absent or on error.
  YAML::Node Map(const std::string& key);

  void Read(const std::string& key, std::string* out);
  void Read(const std::string& key, bool* out);
  void Read(const std::string& key, double* out);
  void Read(const std::string& key, uint64_t* out);
  void Read(const std::string& key, uint32_t* out);
  // A single value reads as a one-item list (spec.simulation's sweeps).
  void Read(const std::string& key, std::vector<double>* out);
  void Read(const std::string& key, std::vector<uint64_t>* out);
  void Read(const std::string& key, std::vector<std::string>* out);
  void Read(const std::string& key, std::map<std::string, std::string>* out);
  // A list of numbers, strictly: a single value is an error, as it is for
  // the Kubernetes API server.
  void ReadList(const std::string& key, std::vector<double>* out);
  // A list of mappings: calls `item(node, path)` for each element.
  template <class Fn>
  void ReadEach(const std::string& key, Fn item) {
    YAML::Node n = Get(key);
    if (!n || n.IsNull()) return;
    if (!n.IsSequence()) return Fail(PathOf(key), "must be a list");
    for (size_t i = 0; i < n.size() && status_->ok(); ++i) {
      item(n[i], PathOf(key) + "[" + std::to_string(i) + "]");
    }
  }
  // Keeps a whole sub-tree as YAML text (pod templates, simulation).
  void ReadRaw(const std::string& key, std::string* out);
  // Accepts `key` without reading it.
  void Ignore(const std::string& key) { known_.insert(key); }

  // Rejects any key that was not read.
  void Finish();

  void Fail(const std::string& path, const std::string& why);

 private:
  YAML::Node Get(const std::string& key);
  YAML::Node Scalar(const std::string& key);

  YAML::Node node_;
  std::string path_;
  Status* status_;
  std::set<std::string> known_;
};

// Records the first failed validation check in a Status.
class FieldChecker {
 public:
  explicit FieldChecker(Status* status) : status_(status) {}
  void Require(bool ok, const std::string& path, const std::string& why);
  void OneOf(const std::string& value, const std::vector<std::string>& choices,
             const std::string& path);

 private:
  Status* status_;
};

// "'text'"
std::string Quoted(const std::string& text);
// "a | b | c"
std::string JoinChoices(const std::vector<std::string>& items);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_API_YAML_FIELDS_H_
