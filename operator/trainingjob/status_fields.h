// StatusFieldsOf<S>: a status struct's fields as a table, one line per
// field, as the spec's are (services/api/job_fields.h). A line names the
// JSON key, the member, the description (and enum or format); the same
// lines write the struct (WriteStatusFields), read it (ReadStatusFields)
// and make its OpenAPI schema (StatusFieldsSchema), so a status field is
// added in one line:
//
//   using F = StatusFieldsOf<WorkersStatus>;
//   F::Count("ready", &WorkersStatus::ready, "trainers running and ready"),
//
// What callers may rely on:
//   - ReadStatusFields never fails: a value of another JSON type (or out of
//     the member's range) reads as unset, that is as the member's value in
//     S{} (a count 0, a string "", a flag false); keys the table does not
//     name are dropped.
//   - What each line writes (otherwise it writes nothing):
//       Count      int64_t: always
//       Integer    std::optional<int64_t> or <uint64_t>: when set
//       Number     std::optional<double>: when set (reads finite numbers only)
//       Text       std::string: always; with EmptyIsUnset(), when not ""
//       Time       std::string, RFC 3339: when not "" (format date-time)
//       Flag       bool: when true
//       Numbers    std::map<std::string, double>: when not empty (finite)
//       Section    a struct with its own table: when that writes anything;
//                  a std::optional one when set, read from a non-empty object
//       Sections   std::map<std::string, Sub>: always; each entry that is
//                  an object is read
//       Computed   nlohmann::json that other code computes, with the schema
//                  the line gives: an array always, an object when not
//                  empty ({} meaning absent)
//     So reading what was written writes it again, when a Section's table
//     always writes something: Write(Read(Write(s))) == Write(s).
//   - The schema lists the lines in table order; a line's schema is
//     {description, type, ...}, then what OneOf and Format add, in the order
//     the line calls them.

#ifndef GAPTRAIN_OPERATOR_TRAININGJOB_STATUS_FIELDS_H_
#define GAPTRAIN_OPERATOR_TRAININGJOB_STATUS_FIELDS_H_

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "operator/trainingjob/object_fields.h"

namespace gaptrain {
namespace trainingjob {

// One line of a table for S. The schema methods return *this, so a line
// reads as one expression.
template <class S>
class StatusField {
 public:
  // The member's value as written; null: nothing to write.
  using Writer = std::function<nlohmann::json(const S&)>;
  // Sets the member from object[key], whatever object holds.
  using Reader = std::function<void(const nlohmann::json& object, const std::string& key, S*)>;

  StatusField(std::string key, nlohmann::ordered_json schema, Writer write, Reader read)
      : key_(std::move(key)),
        schema_(std::move(schema)),
        write_(std::move(write)),
        read_(std::move(read)) {}

  const std::string& key() const { return key_; }
  const nlohmann::ordered_json& schema() const { return schema_; }
  nlohmann::json Write(const S& s) const {
    nlohmann::json v = write_(s);
    if (empty_is_unset_ && v.is_string() && v.get_ref<const std::string&>().empty()) return {};
    return v;
  }
  void Read(const nlohmann::json& object, S* s) const { read_(object, key_, s); }

  StatusField& OneOf(std::vector<std::string> values) {
    schema_["enum"] = std::move(values);
    return *this;
  }
  StatusField& Format(const char* format) {
    schema_["format"] = format;
    return *this;
  }
  StatusField& EmptyIsUnset() {
    empty_is_unset_ = true;
    return *this;
  }

 private:
  std::string key_;
  nlohmann::ordered_json schema_;
  Writer write_;
  Reader read_;
  bool empty_is_unset_ = false;
};

template <class S>
using StatusFields = std::vector<StatusField<S>>;

template <class S>
nlohmann::json WriteStatusFields(const StatusFields<S>& fields, const S& s) {
  nlohmann::json object = nlohmann::json::object();
  for (const StatusField<S>& f : fields) {
    nlohmann::json v = f.Write(s);
    if (!v.is_null()) object[f.key()] = std::move(v);
  }
  return object;
}

template <class S>
S ReadStatusFields(const StatusFields<S>& fields, const nlohmann::json& object) {
  S s;
  for (const StatusField<S>& f : fields) f.Read(object, &s);
  return s;
}

// {description, type: object, properties: each line's schema}.
template <class S>
nlohmann::ordered_json StatusFieldsSchema(const StatusFields<S>& fields,
                                          const std::string& description) {
  nlohmann::ordered_json properties = nlohmann::ordered_json::object();
  for (const StatusField<S>& f : fields) properties[f.key()] = f.schema();
  return {{"description", description}, {"type", "object"}, {"properties", properties}};
}

// The line makers for a table of S (the list above says what each writes).
template <class S>
struct StatusFieldsOf {
  using Line = StatusField<S>;
  using Json = nlohmann::json;

  static Line Count(const char* key, int64_t S::*m, const char* doc) {
    return Line(
        key, Leaf("integer", doc), [m](const S& s) -> Json { return s.*m; },
        [m](const Json& o, const std::string& k, S* s) { s->*m = IntegerAt(o, {k}).value_or(0); });
  }
  static Line Integer(const char* key, std::optional<int64_t> S::*m, const char* doc) {
    return Line(
        key, Leaf("integer", doc), [m](const S& s) { return Optional(s.*m); },
        [m](const Json& o, const std::string& k, S* s) { s->*m = IntegerAt(o, {k}); });
  }
  static Line Integer(const char* key, std::optional<uint64_t> S::*m, const char* doc) {
    return Line(key, Leaf("integer", doc), [m](const S& s) { return Optional(s.*m); },
                [m](const Json& o, const std::string& k, S* s) {
                  const std::optional<int64_t> v = IntegerAt(o, {k});
                  s->*m = v && *v >= 0 ? std::optional<uint64_t>(*v) : std::nullopt;
                });
  }
  static Line Number(const char* key, std::optional<double> S::*m, const char* doc) {
    return Line(key, Leaf("number", doc), [m](const S& s) { return Optional(s.*m); },
                [m](const Json& o, const std::string& k, S* s) {
                  const std::optional<double> v = NumberAt(o, {k});
                  s->*m = v && std::isfinite(*v) ? v : std::nullopt;
                });
  }
  static Line Text(const char* key, std::string S::*m, const char* doc) {
    return Line(
        key, Leaf("string", doc), [m](const S& s) -> Json { return s.*m; },
        [m](const Json& o, const std::string& k, S* s) { s->*m = StringAt(o, {k}); });
  }
  static Line Time(const char* key, std::string S::*m, const char* doc) {
    return Text(key, m, doc).Format("date-time").EmptyIsUnset();
  }
  static Line Flag(const char* key, bool S::*m, const char* doc) {
    return Line(
        key, Leaf("boolean", doc), [m](const S& s) -> Json { return s.*m ? Json(true) : Json(); },
        [m](const Json& o, const std::string& k, S* s) { s->*m = BoolAt(o, {k}); });
  }
  static Line Numbers(const char* key, std::map<std::string, double> S::*m, const char* doc,
                      const char* value_doc) {
    nlohmann::ordered_json schema = Leaf("object", doc);
    schema["additionalProperties"] = Leaf("number", value_doc);
    return Line(key, std::move(schema),
                [m](const S& s) -> Json { return (s.*m).empty() ? Json() : Json(s.*m); },
                [m](const Json& o, const std::string& k, S* s) {
                  for (const auto& item : ObjectAt(o, {k}).items()) {
                    const Json& value = item.value();
                    if (!value.is_number()) continue;
                    const double v = value;
                    if (std::isfinite(v)) (s->*m)[item.key()] = v;
                  }
                });
  }
  template <class Sub>
  static Line Section(const char* key, Sub S::*m, StatusFields<Sub> fields, const char* doc) {
    nlohmann::ordered_json schema = StatusFieldsSchema(fields, doc);
    return Line(key, std::move(schema),
                [m, fields](const S& s) {
                  Json v = WriteStatusFields(fields, s.*m);
                  return v.empty() ? Json() : v;
                },
                [m, fields](const Json& o, const std::string& k, S* s) {
                  s->*m = ReadStatusFields(fields, ObjectAt(o, {k}));
                });
  }
  template <class Sub>
  static Line Section(const char* key, std::optional<Sub> S::*m, StatusFields<Sub> fields,
                      const char* doc) {
    nlohmann::ordered_json schema = StatusFieldsSchema(fields, doc);
    return Line(key, std::move(schema),
                [m, fields](const S& s) {
                  return s.*m ? WriteStatusFields(fields, *(s.*m)) : Json();
                },
                [m, fields](const Json& o, const std::string& k, S* s) {
                  const Json& sub = ObjectAt(o, {k});
                  s->*m = sub.empty() ? std::nullopt
                                      : std::optional<Sub>(ReadStatusFields(fields, sub));
                });
  }
  // The schema names the keys `known` lists (key, description).
  template <class Sub>
  static Line Sections(const char* key, std::map<std::string, Sub> S::*m,
                       StatusFields<Sub> fields, const char* doc,
                       const std::vector<std::pair<const char*, const char*>>& known) {
    nlohmann::ordered_json properties = nlohmann::ordered_json::object();
    for (const auto& [name, name_doc] : known) {
      properties[name] = StatusFieldsSchema(fields, name_doc);
    }
    nlohmann::ordered_json schema = Leaf("object", doc);
    schema["properties"] = std::move(properties);
    return Line(key, std::move(schema),
                [m, fields](const S& s) {
                  Json v = Json::object();
                  for (const auto& [name, sub] : s.*m) v[name] = WriteStatusFields(fields, sub);
                  return v;
                },
                [m, fields](const Json& o, const std::string& k, S* s) {
                  for (const auto& [name, sub] : ObjectAt(o, {k}).items()) {
                    if (sub.is_object()) (s->*m)[name] = ReadStatusFields(fields, sub);
                  }
                });
  }
  // `schema` without its description: {type: array or object, ...}.
  static Line Computed(const char* key, Json S::*m, const char* doc,
                       const nlohmann::ordered_json& schema) {
    nlohmann::ordered_json described{{"description", doc}};
    for (const auto& [name, value] : schema.items()) described[name] = value;
    const bool array = schema.value("type", "") == "array";
    return Line(key, std::move(described),
                [m, array](const S& s) { return array || !(s.*m).empty() ? s.*m : Json(); },
                [m, array](const Json& o, const std::string& k, S* s) {
                  s->*m = array ? ArrayAt(o, {k}) : ObjectAt(o, {k});
                });
  }

 private:
  static nlohmann::ordered_json Leaf(const char* type, const char* doc) {
    return {{"description", doc}, {"type", type}};
  }
  template <class T>
  static Json Optional(const std::optional<T>& v) {
    return v ? Json(*v) : Json();
  }
};

}  // namespace trainingjob
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TRAININGJOB_STATUS_FIELDS_H_
