// YAML text for a JSON value, as Kubernetes manifests are written: block
// mappings and sequences ("- " at the parent key's indentation), keys in
// the value's order, `{}` and `[]` for empty ones. The same value always
// gives the same bytes, so generated files can be compared byte for byte.
//
// Scalars are written so that YAML 1.1 readers (kubectl's go-yaml, PyYAML)
// and YAML 1.2 readers (yaml-cpp) read back the same JSON value: a string
// stays plain only when it cannot be taken for anything else (no spaces,
// no leading digit, not a word such as `no` or `null`), otherwise it is
// double-quoted with JSON escapes; numbers are written by FormatNumber
// (services/api/job_fields.h).

#ifndef GAPTRAIN_SERVICES_API_YAML_TEXT_H_
#define GAPTRAIN_SERVICES_API_YAML_TEXT_H_

#include <nlohmann/json.hpp>
#include <string>

namespace gaptrain {

// The YAML document for `value`, ending in a newline.
std::string YamlText(const nlohmann::ordered_json& value);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_API_YAML_TEXT_H_
