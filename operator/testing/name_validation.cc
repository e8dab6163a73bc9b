#include "operator/testing/name_validation.h"

#include <regex>

namespace gaptrain {
namespace kube_testing {

namespace {

const char kSubdomainFormat[] = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const char kDnsLabelFormat[] = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const char kDns1035Format[] = "[a-z]([-a-z0-9]*[a-z0-9])?";
const char kQualifiedNameFormat[] = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const char kLabelValueFormat[] = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";

const char kQualifiedNameMessage[] =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
    "an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

std::string MaxLength(size_t n) {
  return "must be no more than " + std::to_string(n) + " characters";
}

}  // namespace

std::vector<std::string> DnsSubdomainErrors(const std::string& value) {
  static const std::regex kFormat(kSubdomainFormat);
  std::vector<std::string> errors;
  if (value.size() > 253) errors.push_back(MaxLength(253));
  if (!std::regex_match(value, kFormat)) {
    errors.push_back(
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
        "'-' or '.', and must start and end with an alphanumeric character (e.g. "
        "'example.com', regex used for validation is '" +
        std::string(kSubdomainFormat) + "')");
  }
  return errors;
}

std::vector<std::string> DnsLabelErrors(const std::string& value) {
  static const std::regex kFormat(kDnsLabelFormat);
  std::vector<std::string> errors;
  if (value.size() > 63) errors.push_back(MaxLength(63));
  if (!std::regex_match(value, kFormat)) {
    errors.push_back(
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
        "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
        "regex used for validation is '" +
        std::string(kDnsLabelFormat) + "')");
  }
  return errors;
}

std::vector<std::string> Dns1035LabelErrors(const std::string& value) {
  static const std::regex kFormat(kDns1035Format);
  std::vector<std::string> errors;
  if (value.size() > 63) errors.push_back(MaxLength(63));
  if (!std::regex_match(value, kFormat)) {
    errors.push_back(
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start "
        "with an alphabetic character, and end with an alphanumeric character (e.g. "
        "'my-name',  or 'abc-123', regex used for validation is '" +
        std::string(kDns1035Format) + "')");
  }
  return errors;
}

std::vector<std::string> QualifiedNameErrors(const std::string& value) {
  static const std::regex kFormat(kQualifiedNameFormat);
  std::vector<std::string> errors;
  std::string name = value;
  const size_t slash = value.find('/');
  if (slash != std::string::npos) {
    if (value.find('/', slash + 1) != std::string::npos) {
      errors.push_back(std::string("a qualified name ") + kQualifiedNameMessage +
                       " with an optional DNS subdomain prefix and '/' (e.g. "
                       "'example.com/MyName')");
      return errors;
    }
    const std::string prefix = value.substr(0, slash);
    name = value.substr(slash + 1);
    if (prefix.empty()) {
      errors.push_back("prefix part must be non-empty");
    } else {
      for (const std::string& e : DnsSubdomainErrors(prefix)) {
        errors.push_back("prefix part " + e);
      }
    }
  }
  if (name.empty()) {
    errors.push_back("name part must be non-empty");
  } else if (name.size() > 63) {
    errors.push_back("name part " + MaxLength(63));
  }
  if (!name.empty() && !std::regex_match(name, kFormat)) {
    errors.push_back(std::string("name part ") + kQualifiedNameMessage);
  }
  return errors;
}

std::vector<std::string> LabelValueErrors(const std::string& value) {
  static const std::regex kFormat(kLabelValueFormat);
  std::vector<std::string> errors;
  if (value.size() > 63) errors.push_back(MaxLength(63));
  if (!std::regex_match(value, kFormat)) {
    errors.push_back(
        "a valid label must be an empty string or consist of alphanumeric characters, '-', "
        "'_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  "
        "or 'my_value',  or '12345', regex used for validation is '" +
        std::string(kLabelValueFormat) + "')");
  }
  return errors;
}

}  // namespace kube_testing
}  // namespace gaptrain
