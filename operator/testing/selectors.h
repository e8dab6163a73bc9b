// Selectors: the labelSelector and fieldSelector query parameters of list,
// watch and deletecollection requests, parsed and matched as
// k8s.io/apimachinery does.
//
// Label selectors: comma-separated requirements "k=v", "k==v", "k!=v",
// "k in (a,b)", "k notin (a,b)", "k", "!k", "k>n", "k<n". "!=" and "notin"
// also match objects without the label. Keys must be qualified names
// ("gaptrain.io/job-name") and values valid label values.
//
// Field selectors: comma-separated "f=v", "f==v", "f!=v" where v may escape
// ',', '=' and '\' with a backslash. Which fields exist is the resource's
// business (see ResourceType::SelectableField); a missing field reads as "".

#ifndef GAPTRAIN_OPERATOR_TESTING_SELECTORS_H_
#define GAPTRAIN_OPERATOR_TESTING_SELECTORS_H_

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

#include "services/common/status.h"

namespace gaptrain {
namespace kube_testing {

class LabelSelector {
 public:
  // The empty selector; matches everything.
  LabelSelector() = default;

  // INVALID_ARGUMENT with apimachinery's "unable to parse requirement: ..."
  // text for a malformed selector.
  static Status Parse(const std::string& text, LabelSelector* out);

  // `labels` is an object of strings, or null for an object without labels.
  bool Matches(const nlohmann::json& labels) const;
  bool empty() const { return requirements_.empty(); }

 private:
  enum class Operator { kEquals, kNotEquals, kIn, kNotIn, kExists, kDoesNotExist, kGreater, kLess };
  struct Requirement {
    std::string key;
    Operator op;
    std::vector<std::string> values;
  };
  bool Matches(const Requirement& r, const nlohmann::json& labels) const;

  std::vector<Requirement> requirements_;
};

class FieldSelector {
 public:
  FieldSelector() = default;

  static Status Parse(const std::string& text, FieldSelector* out);

  // `field_value(name)` gives the object's value of a selectable field.
  bool Matches(const std::function<std::string(const std::string&)>& field_value) const;
  bool empty() const { return terms_.empty(); }
  // The field names the selector uses, to check them against what a
  // resource supports.
  std::vector<std::string> Fields() const;

 private:
  struct Term {
    std::string field;
    bool equals;
    std::string value;
  };
  std::vector<Term> terms_;
};

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_SELECTORS_H_
