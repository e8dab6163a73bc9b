#include "operator/kube/api_time.h"

#include <gtest/gtest.h>

#include <chrono>

namespace gaptrain {
namespace kube {
namespace {

using std::chrono::system_clock;

system_clock::time_point At(const std::string& text) {
  system_clock::time_point t;
  EXPECT_TRUE(ParseRfc3339(text, &t)) << text;
  return t;
}

TEST(Rfc3339Test, ParsesTheFormsTheApiServerWrites) {
  const system_clock::time_point base = system_clock::from_time_t(1795413600);
  EXPECT_EQ(At("2026-11-23T06:00:00Z"), base);
  EXPECT_EQ(At("2026-11-23T06:00:00.000000Z"), base);
  EXPECT_EQ(At("2026-11-23T06:00:05.250000Z"), base + std::chrono::milliseconds(5250));
  EXPECT_EQ(At("2026-11-23T06:00:00.123456789Z"),
            base + std::chrono::duration_cast<system_clock::duration>(
                       std::chrono::nanoseconds(123456789)));
  EXPECT_EQ(At("2026-11-23T08:30:00+02:30"), base);
  EXPECT_EQ(At("2026-11-23T05:00:00-01:00"), base);
  EXPECT_EQ(FormatMicroTime(At("2024-02-29T23:59:59.5Z")), "2024-02-29T23:59:59.500000Z");
}

TEST(Rfc3339Test, RefusesAnythingElse) {
  system_clock::time_point t;
  for (const char* bad :
       {"", "yesterday", "2026-11-23", "2026-11-23T06:00:00", "2026-11-23 06:00:00Z",
        "2026-13-01T00:00:00Z", "2026-02-30T00:00:00Z", "2026-11-23T24:00:00Z",
        "2026-11-23T06:00:00.Z", "2026-11-23T06:00:00Zjunk", "2026-11-23T06:00:00+0200",
        "２026-11-23T06:00:00Z"}) {
    EXPECT_FALSE(ParseRfc3339(bad, &t)) << bad;
  }
}

TEST(Rfc3339Test, MicroTimesRoundTrip) {
  const system_clock::time_point start = At("2026-11-23T06:00:00Z");
  const system_clock::time_point t =
      start + std::chrono::milliseconds(250) + std::chrono::microseconds(7);
  EXPECT_EQ(FormatMicroTime(t), "2026-11-23T06:00:00.250007Z");
  EXPECT_EQ(At(FormatMicroTime(t)), t);
  EXPECT_EQ(At("2026-11-23T06:00:00.5Z"), start + std::chrono::milliseconds(500));
}

}  // namespace
}  // namespace kube
}  // namespace gaptrain
