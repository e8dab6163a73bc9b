#include "services/base/flag_values.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "services/base/file_contents.h"

namespace gaptrain {

Status ParseUnsignedFlag(const std::string& flag, const std::string& text, uint64_t min,
                         uint64_t max, uint64_t* out) {
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || text[0] == '-' || text[0] == '+' || *end != '\0' || errno == ERANGE ||
      v < min || v > max) {
    return Status::InvalidArgument(flag + ": must be an integer in [" + std::to_string(min) +
                                   ", " + std::to_string(max) + "], got '" + text + "'");
  }
  *out = v;
  return Status::OK();
}

Status ReadTokenFile(const std::string& flag, const std::string& path, std::string* token) {
  std::string s;
  Status read = ReadFile(path, &s);
  if (!read.ok()) return Status(read.code(), flag + ": " + read.message());
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  if (s.empty()) return Status::InvalidArgument(flag + ": " + path + " is empty");
  *token = s;
  return Status::OK();
}

Status ResolveJobToken(const std::string& token_file, bool allow_none, std::string* token) {
  if (!token_file.empty()) return ReadTokenFile("--token-file", token_file, token);
  if (const char* env = std::getenv("GAPTRAIN_TOKEN"); env != nullptr && *env != '\0') {
    *token = env;
    return Status::OK();
  }
  if (allow_none) {
    token->clear();
    return Status::OK();
  }
  return Status::InvalidArgument(
      "--token-file: the job token is required (or $GAPTRAIN_TOKEN, or --insecure-no-token)");
}

bool IsHostPort(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) return false;
  for (size_t i = colon + 1; i < address.size(); ++i) {
    if (address[i] < '0' || address[i] > '9') return false;
  }
  return true;
}

void FlagSet::Add(const std::string& name, bool takes_value,
                  std::function<Status(const std::string&)> set) {
  flags_[name] = Flag{takes_value, std::move(set)};
}

void FlagSet::String(const std::string& name, std::string* out) {
  Add(name, true, [out](const std::string& text) {
    *out = text;
    return Status::OK();
  });
}

void FlagSet::Switch(const std::string& name, bool* out) {
  Add(name, false, [out](const std::string&) {
    *out = true;
    return Status::OK();
  });
}

void FlagSet::Seconds(const std::string& name, double max_seconds, double* out) {
  Add(name, true, [name, max_seconds, out](const std::string& text) {
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v) || v < 0 ||
        v > max_seconds) {
      char max[32];
      std::snprintf(max, sizeof max, "%g", max_seconds);
      return Status::InvalidArgument(name + ": must be a number of seconds in [0, " + max +
                                     "], got '" + text + "'");
    }
    *out = v;
    return Status::OK();
  });
}

void FlagSet::OneOf(const std::string& name, std::vector<std::string> choices, std::string* out) {
  Add(name, true, [name, choices, out](const std::string& text) {
    for (const std::string& c : choices) {
      if (text == c) {
        *out = text;
        return Status::OK();
      }
    }
    std::string list;
    for (size_t i = 0; i < choices.size(); ++i) {
      list += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
    }
    return Status::InvalidArgument(name + ": must be " + list + ", got '" + text + "'");
  });
}

Status FlagSet::Parse(const std::vector<std::string>& args) const {
  for (size_t i = 0; i < args.size(); ++i) {
    auto it = flags_.find(args[i]);
    if (it == flags_.end()) return Status::InvalidArgument("unknown flag '" + args[i] + "'");
    std::string value;
    if (it->second.takes_value) {
      if (i + 1 >= args.size()) return Status::InvalidArgument(args[i] + ": needs a value");
      value = args[++i];
    }
    GAPTRAIN_RETURN_IF_ERROR(it->second.set(value));
  }
  return Status::OK();
}

}  // namespace gaptrain
