#include "services/common/flag_values.h"

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

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

Status ResolveJobToken(const std::string& token_file, bool allow_none, std::string* token) {
  if (!token_file.empty()) {
    std::ifstream in(token_file);
    if (!in) return Status::NotFound("--token-file: cannot read " + token_file);
    std::ostringstream text;
    text << in.rdbuf();
    std::string s = text.str();
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
    if (s.empty()) return Status::InvalidArgument("--token-file: " + token_file + " is empty");
    *token = s;
    return Status::OK();
  }
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

}  // namespace gaptrain
