// Helpers for the services' command-line flags: numbers in range, the job
// token, addresses. Errors name the flag.

#ifndef GAPTRAIN_SERVICES_COMMON_FLAG_VALUES_H_
#define GAPTRAIN_SERVICES_COMMON_FLAG_VALUES_H_

#include <cstdint>
#include <string>

#include "services/common/status.h"

namespace gaptrain {

// An integer in [min, max]: "--http-port: must be an integer in [0, 65535], got 'x'".
Status ParseUnsignedFlag(const std::string& flag, const std::string& text, uint64_t min,
                         uint64_t max, uint64_t* out);

// The job token: the content of `token_file` (trailing newlines dropped)
// when given, else $GAPTRAIN_TOKEN. Missing everywhere is an error unless
// `allow_none` (--insecure-no-token), which leaves *token empty.
Status ResolveJobToken(const std::string& token_file, bool allow_none, std::string* token);

// "host:port": a non-empty host and a numeric port.
bool IsHostPort(const std::string& address);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_COMMON_FLAG_VALUES_H_
