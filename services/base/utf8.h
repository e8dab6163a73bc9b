// Text checks for strings that travel in protobuf `string` fields, which
// must be well-formed UTF-8 (or the message does not parse back).

#ifndef GAPTRAIN_SERVICES_BASE_UTF8_H_
#define GAPTRAIN_SERVICES_BASE_UTF8_H_

#include <string>

namespace gaptrain {

// True when `s` is well-formed UTF-8: no overlong forms, no surrogates,
// nothing above U+10FFFF.
bool IsUtf8(const std::string& s);

// True when `s` is well-formed UTF-8 without control characters (bytes
// below 0x20, and DEL): one printable line.
bool IsPrintableUtf8(const std::string& s);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_BASE_UTF8_H_
