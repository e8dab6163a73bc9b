// Helpers for the services' command-line flags: numbers in range, the job
// token, addresses. Errors name the flag.

#ifndef GAPTRAIN_SERVICES_BASE_FLAG_VALUES_H_
#define GAPTRAIN_SERVICES_BASE_FLAG_VALUES_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "services/base/status.h"

namespace gaptrain {

// An integer in [min, max]: "--http-port: must be an integer in [0, 65535], got 'x'".
Status ParseUnsignedFlag(const std::string& flag, const std::string& text, uint64_t min,
                         uint64_t max, uint64_t* out);

// A token kept in a file (a mounted Secret's key): its content, trailing
// newlines and spaces dropped; errors name `flag` and refuse an empty one.
Status ReadTokenFile(const std::string& flag, const std::string& path, std::string* token);

// The job token: the content of `token_file` (trailing newlines dropped)
// when given, else $GAPTRAIN_TOKEN. Missing everywhere is an error unless
// `allow_none` (--insecure-no-token), which leaves *token empty.
Status ResolveJobToken(const std::string& token_file, bool allow_none, std::string* token);

// "host:port": a non-empty host and a numeric port.
bool IsHostPort(const std::string& address);

// FlagSet: a service's flags, declared once with where each value goes.
// Parse() reads "--name value" pairs (and value-less switches), converts
// and range-checks each value, and rejects unknown flags; errors name the
// flag ("--http-port: must be an integer in [0, 65535], got '70000'").
// Checks across flags (required ones, pairs) stay with the caller.
class FlagSet {
 public:
  void String(const std::string& name, std::string* out);
  // A switch: present means true.
  void Switch(const std::string& name, bool* out);
  // An integer in [min, max], stored as T.
  template <class T>
  void Unsigned(const std::string& name, uint64_t min, uint64_t max, T* out) {
    Add(name, true, [name, min, max, out](const std::string& text) {
      uint64_t v = 0;
      GAPTRAIN_RETURN_IF_ERROR(ParseUnsignedFlag(name, text, min, max, &v));
      *out = static_cast<T>(v);
      return Status::OK();
    });
  }
  // A number of seconds in [0, max_seconds].
  void Seconds(const std::string& name, double max_seconds, double* out);
  // One of `choices` ("must be cpu or cuda, got 'tpu'").
  void OneOf(const std::string& name, std::vector<std::string> choices, std::string* out);

  Status Parse(const std::vector<std::string>& args) const;

 private:
  struct Flag {
    bool takes_value;
    std::function<Status(const std::string& value)> set;
  };
  void Add(const std::string& name, bool takes_value,
           std::function<Status(const std::string&)> set);

  std::map<std::string, Flag> flags_;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_BASE_FLAG_VALUES_H_
