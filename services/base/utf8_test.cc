#include "services/base/utf8.h"

#include <gtest/gtest.h>

namespace gaptrain {
namespace {

TEST(Utf8Test, WellFormedTextPasses) {
  EXPECT_TRUE(IsUtf8(""));
  EXPECT_TRUE(IsUtf8("store:9000 refused the connection"));
  EXPECT_TRUE(IsUtf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));  // é € 😀
}

TEST(Utf8Test, MalformedSequencesAreRefused) {
  EXPECT_FALSE(IsUtf8("\xff"));
  EXPECT_FALSE(IsUtf8("\xc3"));              // cut short
  EXPECT_FALSE(IsUtf8("\xc3\x28"));          // a bad continuation byte
  EXPECT_FALSE(IsUtf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(IsUtf8("\xed\xa0\x80"));      // a surrogate
  EXPECT_FALSE(IsUtf8("\xf4\x90\x80\x80"));  // above U+10FFFF
}

TEST(Utf8Test, PrintableRefusesControlCharacters) {
  EXPECT_TRUE(IsPrintableUtf8("ConnectionRefusedError: [Errno 111] caf\xc3\xa9"));
  EXPECT_FALSE(IsPrintableUtf8("two\nlines"));
  EXPECT_FALSE(IsPrintableUtf8("a\ttab"));
  EXPECT_FALSE(IsPrintableUtf8(std::string("nul\0byte", 8)));
  EXPECT_FALSE(IsPrintableUtf8("del\x7f"));
  EXPECT_FALSE(IsPrintableUtf8("\xff"));
}

}  // namespace
}  // namespace gaptrain
