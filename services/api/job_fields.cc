#include "services/api/job_fields.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <regex>

#include "services/api/yaml_fields.h"

namespace gaptrain {
namespace {

void CheckString(const FieldSchema& f, const std::string& path, const std::string& value,
                 Status* status) {
  FieldChecker c(status);
  if (f.required) c.Require(!value.empty(), path, "is required");
  if (f.non_empty) c.Require(!value.empty(), path, "must not be empty");
  if (f.max_length > 0) {
    c.Require(value.size() <= f.max_length, path,
              "must be at most " + std::to_string(f.max_length) + " characters");
  }
  if (!f.pattern.empty()) {
    c.Require(std::regex_match(value, std::regex(f.pattern)), path,
              "must consist of " + f.pattern_meaning + ", got " + Quoted(value));
  }
  if (!f.choices.empty()) c.OneOf(value, f.choices, path);
}

void CheckRange(const FieldSchema& f, const std::string& path, double value,
                const std::string& written, Status* status) {
  const std::string why = RangeError(f, value, written);
  FieldChecker(status).Require(why.empty(), path, why);
}

void ReadField(const JobField& field, YamlFields* fields, void* spec, Status* status) {
  const FieldSchema& f = field.schema();
  const std::string path = fields->PathOf(f.name);
  const bool present = fields->Has(f.name);
  const FieldTarget target = field.Bind(spec);
  switch (f.type) {
    case FieldType::kString: {
      std::string* out = std::get<std::string*>(target);
      fields->Read(f.name, out);
      if (status->ok() && (present || f.required)) CheckString(f, path, *out, status);
      return;
    }
    case FieldType::kBoolean:
      fields->Read(f.name, std::get<bool*>(target));
      return;
    case FieldType::kInteger: {
      uint32_t* narrow = std::holds_alternative<uint32_t*>(target) ? std::get<uint32_t*>(target)
                                                                    : nullptr;
      uint64_t value = narrow != nullptr ? *narrow : *std::get<uint64_t*>(target);
      fields->Read(f.name, &value);
      if (!present || !status->ok()) return;
      CheckRange(f, path, static_cast<double>(value), std::to_string(value), status);
      if (narrow != nullptr) {
        FieldChecker(status).Require(value <= std::numeric_limits<uint32_t>::max(), path,
                                     "must be at most 4294967295");
        if (status->ok()) *narrow = static_cast<uint32_t>(value);
      } else if (status->ok()) {
        *std::get<uint64_t*>(target) = value;
      }
      return;
    }
    case FieldType::kNumber: {
      double* out = std::get<double*>(target);
      fields->Read(f.name, out);
      if (present && status->ok()) CheckRange(f, path, *out, FormatNumber(*out), status);
      return;
    }
    case FieldType::kNumberList: {
      std::vector<double>* out = std::get<std::vector<double>*>(target);
      fields->ReadList(f.name, out);
      if (!present) return;
      if (f.max_items > 0) {
        FieldChecker(status).Require(out->size() <= f.max_items, path,
                                     "must have at most " + std::to_string(f.max_items) +
                                         " items, got " + std::to_string(out->size()));
      }
      for (size_t i = 0; i < out->size() && status->ok(); ++i) {
        const double item = (*out)[i];
        CheckRange(f, path + "[" + std::to_string(i) + "]", item, FormatNumber(item), status);
      }
      return;
    }
    case FieldType::kStringMap:
      fields->Read(f.name, std::get<std::map<std::string, std::string>*>(target));
      return;
    case FieldType::kObject:
      fields->ReadRaw(f.name, std::get<std::string*>(target));
      return;
    case FieldType::kSection: {
      const YAML::Node node = fields->Map(f.name);
      if (f.required && status->ok() && !present) fields->Fail(path, "is required");
      ReadFieldsAt(*f.section, node, path, std::get<void*>(target), status);
      return;
    }
  }
}

}  // namespace

JobField& JobField::Bound(FieldBound* bound, double v, bool exclusive) {
  *bound = FieldBound{true, v, exclusive};
  return *this;
}

JobField& JobField::Limit(double v, std::string why) {
  schema_.limit_reason = std::move(why);
  return Bound(&schema_.maximum, v, false);
}

JobField& JobField::OneOf(std::vector<std::string> choices) {
  schema_.choices = std::move(choices);
  return *this;
}

JobField& JobField::Required() {
  schema_.required = true;
  return *this;
}

JobField& JobField::NonEmpty() {
  schema_.non_empty = true;
  return *this;
}

JobField& JobField::MaxLength(uint32_t characters) {
  schema_.max_length = characters;
  return *this;
}

JobField& JobField::MaxItems(uint32_t items) {
  schema_.max_items = items;
  return *this;
}

JobField& JobField::Pattern(std::string regex, std::string meaning) {
  schema_.pattern = std::move(regex);
  schema_.pattern_meaning = std::move(meaning);
  return *this;
}

JobField& JobField::NoDefault() {
  schema_.default_value = FieldDefault();
  return *this;
}

void ReadFieldsAt(const FieldSection& section, const YAML::Node& node, const std::string& path,
                  void* spec, Status* status) {
  YamlFields fields(node, path, status);
  for (const std::string& key : section.ignored()) fields.Ignore(key);
  for (const JobField& field : section.fields()) ReadField(field, &fields, spec, status);
  fields.Finish();
}

void ForEachField(const FieldSection& section, const std::string& path,
                  const std::function<void(const std::string&, const FieldSchema&)>& visit) {
  for (const JobField& field : section.fields()) {
    const FieldSchema& f = field.schema();
    const std::string field_path = path.empty() ? f.name : path + "." + f.name;
    visit(field_path, f);
    if (f.section != nullptr) ForEachField(*f.section, field_path, visit);
  }
}

std::string RangeError(const FieldSchema& f, double value, const std::string& written) {
  const FieldBound& lo = f.minimum;
  const FieldBound& hi = f.maximum;
  const bool too_low = lo.set && (lo.exclusive ? !(value > lo.value) : !(value >= lo.value));
  const bool too_high = hi.set && (hi.exclusive ? !(value < hi.value) : !(value <= hi.value));
  if (!too_low && !too_high) return "";
  const std::string got = ", got " + written;
  if (too_high && !f.limit_reason.empty()) {
    return "must be <= " + FormatNumber(hi.value) + " (" + f.limit_reason + ")" + got;
  }
  if (too_low && (!hi.set || !f.limit_reason.empty())) {
    return std::string("must be ") + (lo.exclusive ? "> " : ">= ") + FormatNumber(lo.value) + got;
  }
  if (!lo.set) return std::string("must be ") + (hi.exclusive ? "< " : "<= ") +
                      FormatNumber(hi.value) + got;
  return std::string("must be in ") + (lo.exclusive ? "(" : "[") + FormatNumber(lo.value) + ", " +
         FormatNumber(hi.value) + (hi.exclusive ? ")" : "]") + got;
}

std::string FormatNumber(double value) {
  if (value == 0) return "0";
  if (std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 9007199254740992.0) {
    char digits[32];
    std::snprintf(digits, sizeof digits, "%.0f", value);
    return digits;
  }
  char text[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(text, sizeof text, "%.*g", precision, value);
    if (std::strtod(text, nullptr) == value) break;
  }
  std::string s = text;
  const size_t e = s.find('e');
  if (e == std::string::npos) return s;
  std::string mantissa = s.substr(0, e);
  if (mantissa.find('.') == std::string::npos) mantissa += ".0";
  const char sign = s[e + 1];
  size_t first = e + 2;
  while (first + 1 < s.size() && s[first] == '0') ++first;
  return mantissa + "e" + sign + s.substr(first);
}

const char* OpenApiTypeName(FieldType type) {
  switch (type) {
    case FieldType::kString:
      return "string";
    case FieldType::kBoolean:
      return "boolean";
    case FieldType::kInteger:
      return "integer";
    case FieldType::kNumber:
      return "number";
    case FieldType::kNumberList:
      return "array";
    case FieldType::kStringMap:
    case FieldType::kObject:
    case FieldType::kSection:
      return "object";
  }
  return "object";
}

}  // namespace gaptrain
