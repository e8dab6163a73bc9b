#include "services/api/yaml_fields.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace gaptrain {
namespace {

bool ParseNumber(const std::string& s, double* out) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

bool ParseUnsigned(const std::string& s, uint64_t* out) {
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (s.empty() || s[0] == '-' || s[0] == '+' || *end != '\0' || errno == ERANGE) return false;
  *out = v;
  return true;
}

}  // namespace

std::string Quoted(const std::string& text) { return "'" + text + "'"; }

std::string JoinChoices(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : " | ") + s;
  return out;
}

YamlFields::YamlFields(const YAML::Node& node, std::string path, Status* status)
    : node_(node), path_(std::move(path)), status_(status) {
  if (status_->ok() && node_ && !node_.IsNull() && !node_.IsMap()) {
    Fail(path_, "must be a mapping");
  }
}

std::string YamlFields::PathOf(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

bool YamlFields::Has(const std::string& key) const {
  if (!status_->ok() || !node_ || !node_.IsMap()) return false;
  const YAML::Node n = node_[key];
  return n && !n.IsNull();
}

void YamlFields::Fail(const std::string& path, const std::string& why) {
  if (status_->ok()) *status_ = Status::InvalidArgument(path + ": " + why);
}

YAML::Node YamlFields::Get(const std::string& key) {
  known_.insert(key);
  if (!status_->ok() || !node_ || !node_.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  return node_[key];
}

YAML::Node YamlFields::Scalar(const std::string& key) {
  YAML::Node n = Get(key);
  if (!n || n.IsNull()) return YAML::Node(YAML::NodeType::Undefined);
  if (!n.IsScalar()) {
    Fail(PathOf(key), "must be a single value");
    return YAML::Node(YAML::NodeType::Undefined);
  }
  return n;
}

YAML::Node YamlFields::Map(const std::string& key) {
  YAML::Node n = Get(key);
  if (n && !n.IsNull() && !n.IsMap()) {
    Fail(PathOf(key), "must be a mapping");
    return YAML::Node(YAML::NodeType::Undefined);
  }
  return n;
}

void YamlFields::Read(const std::string& key, std::string* out) {
  YAML::Node n = Scalar(key);
  if (n) *out = n.Scalar();
}

void YamlFields::Read(const std::string& key, bool* out) {
  YAML::Node n = Scalar(key);
  if (!n) return;
  const std::string& s = n.Scalar();
  if (s == "true" || s == "True" || s == "TRUE") {
    *out = true;
  } else if (s == "false" || s == "False" || s == "FALSE") {
    *out = false;
  } else {
    Fail(PathOf(key), "must be true or false, got " + Quoted(s));
  }
}

void YamlFields::Read(const std::string& key, double* out) {
  YAML::Node n = Scalar(key);
  if (n && !ParseNumber(n.Scalar(), out)) {
    Fail(PathOf(key), "must be a number, got " + Quoted(n.Scalar()));
  }
}

void YamlFields::Read(const std::string& key, uint64_t* out) {
  YAML::Node n = Scalar(key);
  if (n && !ParseUnsigned(n.Scalar(), out)) {
    Fail(PathOf(key), "must be a non-negative integer, got " + Quoted(n.Scalar()));
  }
}

void YamlFields::Read(const std::string& key, uint32_t* out) {
  uint64_t v = *out;
  Read(key, &v);
  if (v > UINT32_MAX) return Fail(PathOf(key), "must be at most " + std::to_string(UINT32_MAX));
  *out = static_cast<uint32_t>(v);
}

void YamlFields::Read(const std::string& key, std::vector<double>* out) {
  YAML::Node n = Get(key);
  if (!n || n.IsNull()) return;
  if (n.IsScalar()) n = YAML::Node(std::vector<std::string>{n.Scalar()});  // one value
  if (!n.IsSequence()) return Fail(PathOf(key), "must be a list of numbers");
  std::vector<double> values(n.size());
  for (size_t i = 0; i < n.size(); ++i) {
    if (!n[i].IsScalar() || !ParseNumber(n[i].Scalar(), &values[i])) {
      return Fail(PathOf(key) + "[" + std::to_string(i) + "]", "must be a number");
    }
  }
  *out = values;
}

void YamlFields::ReadList(const std::string& key, std::vector<double>* out) {
  YAML::Node n = Get(key);
  if (!n || n.IsNull()) return;
  if (!n.IsSequence()) return Fail(PathOf(key), "must be a list of numbers");
  Read(key, out);
}

void YamlFields::Read(const std::string& key, std::vector<uint64_t>* out) {
  YAML::Node n = Get(key);
  if (!n || n.IsNull()) return;
  if (n.IsScalar()) n = YAML::Node(std::vector<std::string>{n.Scalar()});
  if (!n.IsSequence()) return Fail(PathOf(key), "must be a list of non-negative integers");
  std::vector<uint64_t> values(n.size());
  for (size_t i = 0; i < n.size(); ++i) {
    if (!n[i].IsScalar() || !ParseUnsigned(n[i].Scalar(), &values[i])) {
      return Fail(PathOf(key) + "[" + std::to_string(i) + "]",
                  "must be a non-negative integer");
    }
  }
  *out = values;
}

void YamlFields::Read(const std::string& key, std::vector<std::string>* out) {
  YAML::Node n = Get(key);
  if (!n || n.IsNull()) return;
  if (n.IsScalar()) {
    *out = {n.Scalar()};
    return;
  }
  if (!n.IsSequence()) return Fail(PathOf(key), "must be a list of strings");
  std::vector<std::string> values;
  for (size_t i = 0; i < n.size(); ++i) {
    if (!n[i].IsScalar()) {
      return Fail(PathOf(key) + "[" + std::to_string(i) + "]", "must be a string");
    }
    values.push_back(n[i].Scalar());
  }
  *out = values;
}

void YamlFields::Read(const std::string& key, std::map<std::string, std::string>* out) {
  YAML::Node n = Map(key);
  if (!n || n.IsNull()) return;
  for (const auto& kv : n) {
    if (!kv.second.IsScalar()) {
      return Fail(PathOf(key) + "." + kv.first.Scalar(), "must be a string");
    }
    (*out)[kv.first.Scalar()] = kv.second.Scalar();
  }
}

void YamlFields::ReadRaw(const std::string& key, std::string* out) {
  YAML::Node n = Map(key);
  if (!n || n.IsNull()) return;
  YAML::Emitter e;
  e << n;
  *out = e.c_str();
}

void YamlFields::Finish() {
  if (!status_->ok() || !node_ || !node_.IsMap()) return;
  for (const auto& kv : node_) {
    const std::string key = kv.first.Scalar();
    if (known_.count(key) == 0) {
      std::vector<std::string> names(known_.begin(), known_.end());
      return Fail(PathOf(key), "unknown field (known here: " + JoinChoices(names) + ")");
    }
  }
}

void FieldChecker::Require(bool ok, const std::string& path, const std::string& why) {
  if (!ok && status_->ok()) *status_ = Status::InvalidArgument(path + ": " + why);
}

void FieldChecker::OneOf(const std::string& value, const std::vector<std::string>& choices,
                         const std::string& path) {
  for (const std::string& c : choices) {
    if (value == c) return;
  }
  Require(false, path, "must be one of " + JoinChoices(choices) + ", got " + Quoted(value));
}

}  // namespace gaptrain
