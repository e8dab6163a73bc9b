// The TrainingJob manifest's schema as data: one line per field, declared
// next to the struct the field fills (training_job.h). The same lines
// drive the strict parser (ReadFields) and the CustomResourceDefinition's
// OpenAPI schema (operator/crd), so a field, its type, default, choices and
// range cannot differ between `gaptrain run` and `kubectl apply`.
//
// A line names the field's key, the struct member it fills and a one-line
// description:
//
//   using F = FieldsOf<OptimizerSpec>;
//   F::Number("momentum", &OptimizerSpec::momentum, "γ").AtLeast(0).Below(1),
//
// Its default is the member's value in a default-constructed struct (an
// empty string has none; NoDefault() drops one whose zero means "unset").
// The rules on the line are the single-field ones, checked by ReadFields
// when the field is present: choices, range, required, non-empty, length,
// pattern, a list's length. Rules between fields stay in code.
//
// Ranges: AtLeast/Above and AtMost/Below are bounds that belong to the
// value's meaning, reported as an interval ("must be in [0, 1), got 1.5").
// Limit(max, why) is an upper bound the rest of the code can honour,
// reported with its reason ("must be <= 1024 (why), got 5000"); a value
// below the minimum of such a field gets "must be >= 1, got 0".

#ifndef GAPTRAIN_SERVICES_API_JOB_FIELDS_H_
#define GAPTRAIN_SERVICES_API_JOB_FIELDS_H_

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "services/base/status.h"

namespace gaptrain {

// The JSON (and OpenAPI) type of a field's value.
enum class FieldType {
  kString,
  kBoolean,
  kInteger,     // non-negative
  kNumber,
  kNumberList,
  kStringMap,
  kObject,      // free-form mapping kept as YAML text (a pod template)
  kSection,     // a mapping of further fields
};

struct FieldBound {
  bool set = false;
  double value = 0;
  bool exclusive = false;
};

// A default as the manifest spells it; monostate: none.
using FieldDefault =
    std::variant<std::monostate, std::string, bool, uint64_t, double, std::vector<double>>;

class FieldSection;

struct FieldSchema {
  std::string name;  // the key in its mapping: "momentum"
  FieldType type = FieldType::kString;
  std::string description;
  FieldDefault default_value;
  std::vector<std::string> choices;  // strings: the allowed values
  // Numbers and integers: of the value; number lists: of each item.
  FieldBound minimum, maximum;
  std::string limit_reason;  // set: `maximum` is a limit (see Limit)
  bool required = false;     // must be present (a string: and not empty)
  bool non_empty = false;    // a string, when present
  uint32_t max_length = 0;   // a string's characters; 0: any
  uint32_t max_items = 0;    // a list's items; 0: any
  std::string pattern;       // a string matches this whole (ECMAScript regex)
  std::string pattern_meaning;  // "lower-case letters, digits and '-'"
  const FieldSection* section = nullptr;  // kSection
};

// Where ReadFields stores a field's value; void*: a section's struct.
using FieldTarget = std::variant<std::string*, bool*, uint32_t*, uint64_t*, double*,
                                 std::vector<double>*, std::map<std::string, std::string>*,
                                 void*>;

// One line of a table: the schema and the struct member it fills. The rule
// methods return *this, so a line reads as one expression.
class JobField {
 public:
  JobField(FieldSchema schema, std::function<FieldTarget(void*)> bind)
      : schema_(std::move(schema)), bind_(std::move(bind)) {}

  const FieldSchema& schema() const { return schema_; }
  // The member of the struct at `spec` (the table's struct type).
  FieldTarget Bind(void* spec) const { return bind_(spec); }

  JobField& AtLeast(double v) { return Bound(&schema_.minimum, v, false); }
  JobField& Above(double v) { return Bound(&schema_.minimum, v, true); }
  JobField& AtMost(double v) { return Bound(&schema_.maximum, v, false); }
  JobField& Below(double v) { return Bound(&schema_.maximum, v, true); }
  JobField& Limit(double v, std::string why);
  JobField& OneOf(std::vector<std::string> choices);
  JobField& Required();
  JobField& NonEmpty();
  JobField& MaxLength(uint32_t characters);
  JobField& MaxItems(uint32_t items);
  JobField& Pattern(std::string regex, std::string meaning);
  JobField& NoDefault();

 private:
  JobField& Bound(FieldBound* bound, double v, bool exclusive);

  FieldSchema schema_;
  std::function<FieldTarget(void*)> bind_;
};

// The fields of one mapping, in the order they are documented and emitted.
// `ignored`: keys accepted and not read (what Kubernetes writes into
// metadata).
class FieldSection {
 public:
  const std::vector<JobField>& fields() const { return fields_; }
  const std::vector<std::string>& ignored() const { return ignored_; }

 protected:
  FieldSection(std::vector<JobField> fields, std::vector<std::string> ignored)
      : fields_(std::move(fields)), ignored_(std::move(ignored)) {}

 private:
  std::vector<JobField> fields_;
  std::vector<std::string> ignored_;
};

// A section whose fields fill an S: ReadFields and FieldsOf<>::Section
// check the struct type at compile time.
template <class S>
class FieldSectionOf : public FieldSection {
 public:
  explicit FieldSectionOf(std::vector<JobField> fields, std::vector<std::string> ignored = {})
      : FieldSection(std::move(fields), std::move(ignored)) {}
};

// The line makers for a table of S.
template <class S>
struct FieldsOf {
  static JobField Text(const char* key, std::string S::*member, const char* doc) {
    return Make(FieldType::kString, key, member, doc);
  }
  static JobField Flag(const char* key, bool S::*member, const char* doc) {
    return Make(FieldType::kBoolean, key, member, doc);
  }
  // uint32_t or uint64_t; the minimum is 0 until AtLeast/Above says more.
  template <class Int>
  static JobField Integer(const char* key, Int S::*member, const char* doc) {
    static_assert(std::is_same<Int, uint32_t>::value || std::is_same<Int, uint64_t>::value,
                  "integer fields are uint32_t or uint64_t");
    return Make(FieldType::kInteger, key, member, doc).AtLeast(0);
  }
  static JobField Number(const char* key, double S::*member, const char* doc) {
    return Make(FieldType::kNumber, key, member, doc);
  }
  static JobField Numbers(const char* key, std::vector<double> S::*member, const char* doc) {
    return Make(FieldType::kNumberList, key, member, doc);
  }
  static JobField StringMap(const char* key, std::map<std::string, std::string> S::*member,
                            const char* doc) {
    return Make(FieldType::kStringMap, key, member, doc);
  }
  // A free-form mapping (a PodTemplateSpec), kept as YAML text.
  static JobField Object(const char* key, std::string S::*member, const char* doc) {
    FieldSchema schema{key, FieldType::kObject, doc};
    return JobField(std::move(schema), [member](void* s) -> FieldTarget {
      return &(static_cast<S*>(s)->*member);
    });
  }
  template <class Sub>
  static JobField Section(const char* key, Sub S::*member, const FieldSectionOf<Sub>& fields,
                          const char* doc) {
    FieldSchema schema{key, FieldType::kSection, doc};
    schema.section = &fields;
    return JobField(std::move(schema), [member](void* s) -> FieldTarget {
      return static_cast<void*>(&(static_cast<S*>(s)->*member));
    });
  }

 private:
  template <class T>
  static JobField Make(FieldType type, const char* key, T S::*member, const char* doc) {
    FieldSchema schema{key, type, doc};
    schema.default_value = DefaultOf(S{}.*member);
    return JobField(std::move(schema), [member](void* s) -> FieldTarget {
      return &(static_cast<S*>(s)->*member);
    });
  }
  static FieldDefault DefaultOf(const std::string& v) {
    return v.empty() ? FieldDefault() : FieldDefault(v);
  }
  static FieldDefault DefaultOf(bool v) { return v; }
  static FieldDefault DefaultOf(uint32_t v) { return uint64_t{v}; }
  static FieldDefault DefaultOf(uint64_t v) { return v; }
  static FieldDefault DefaultOf(double v) { return v; }
  static FieldDefault DefaultOf(const std::vector<double>& v) { return v; }
  static FieldDefault DefaultOf(const std::map<std::string, std::string>&) { return {}; }
};

// Reads the mapping `node` at `path` ("spec.training") into *spec through
// `section`: absent or null, every field keeps its default. The first
// error goes to *status (if it holds none yet) and names the field's path;
// a key the section does not know is an error that lists the known ones.
void ReadFieldsAt(const FieldSection& section, const YAML::Node& node, const std::string& path,
                  void* spec, Status* status);
template <class S>
void ReadFields(const FieldSectionOf<S>& section, const YAML::Node& node, const std::string& path,
                S* spec, Status* status) {
  ReadFieldsAt(section, node, path, spec, status);
}

// Calls visit(path, field) for every field under `section`, depth first in
// table order; a section's own line comes before its fields.
void ForEachField(const FieldSection& section, const std::string& path,
                  const std::function<void(const std::string&, const FieldSchema&)>& visit);

// "" when `value` is within the field's range, else why not ("must be in
// [0, 1), got 1.5"), with the value written as `written`.
std::string RangeError(const FieldSchema& field, double value, const std::string& written);

// A number as the manifest, the CRD and the errors write it: integral
// values below 2^53 in digits ("65536"), others in the shortest form that
// reads back as the same double, with an exponent as "1.0e-8" (YAML 1.1
// readers want the '.' and the sign).
std::string FormatNumber(double value);

// "string", "boolean", "integer", "number", "array" or "object".
const char* OpenApiTypeName(FieldType type);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_API_JOB_FIELDS_H_
