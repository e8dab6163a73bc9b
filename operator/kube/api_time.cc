#include "operator/kube/api_time.h"

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <ctime>

namespace gaptrain {
namespace kube {

namespace {

// Reads `count` digits at text[*pos], advancing *pos.
bool Digits(const std::string& text, size_t* pos, int count, int* value) {
  if (*pos + count > text.size()) return false;
  *value = 0;
  for (int i = 0; i < count; ++i) {
    const char c = text[*pos + i];
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    *value = *value * 10 + (c - '0');
  }
  *pos += count;
  return true;
}

bool Expect(const std::string& text, size_t* pos, char c) {
  if (*pos >= text.size() || text[*pos] != c) return false;
  ++*pos;
  return true;
}

}  // namespace

std::string FormatMicroTime(std::chrono::system_clock::time_point time) {
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(time.time_since_epoch()).count();
  std::time_t seconds = static_cast<std::time_t>(micros / 1000000);
  long fraction = static_cast<long>(micros % 1000000);
  if (fraction < 0) {
    fraction += 1000000;
    --seconds;
  }
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, fraction);
  return buf;
}

bool ParseRfc3339(const std::string& text, std::chrono::system_clock::time_point* out) {
  size_t pos = 0;
  int year, month, day, hour, minute, second;
  if (!Digits(text, &pos, 4, &year) || !Expect(text, &pos, '-') || !Digits(text, &pos, 2, &month) ||
      !Expect(text, &pos, '-') || !Digits(text, &pos, 2, &day) ||
      !(Expect(text, &pos, 'T') || Expect(text, &pos, 't')) || !Digits(text, &pos, 2, &hour) ||
      !Expect(text, &pos, ':') || !Digits(text, &pos, 2, &minute) || !Expect(text, &pos, ':') ||
      !Digits(text, &pos, 2, &second)) {
    return false;
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) {
    return false;
  }
  std::chrono::nanoseconds fraction{0};
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    int64_t nanos = 0;
    int digits = 0;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
      if (digits < 9) nanos = nanos * 10 + (text[pos] - '0');
      ++digits;
      ++pos;
    }
    if (digits == 0) return false;
    for (int i = digits; i < 9; ++i) nanos *= 10;
    fraction = std::chrono::nanoseconds(nanos);
  }
  int offset_seconds = 0;
  if (Expect(text, &pos, 'Z') || Expect(text, &pos, 'z')) {
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    const int sign = text[pos] == '-' ? -1 : 1;
    ++pos;
    int oh, om;
    if (!Digits(text, &pos, 2, &oh) || !Expect(text, &pos, ':') || !Digits(text, &pos, 2, &om) ||
        oh > 23 || om > 59) {
      return false;
    }
    offset_seconds = sign * (oh * 3600 + om * 60);
  } else {
    return false;
  }
  if (pos != text.size()) return false;
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  const std::time_t seconds = timegm(&tm);
  if (tm.tm_mday != day) return false;  // 2026-02-31 normalised to March
  *out = std::chrono::system_clock::from_time_t(seconds - offset_seconds) +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(fraction);
  return true;
}

}  // namespace kube
}  // namespace gaptrain
