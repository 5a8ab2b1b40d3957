// core/include/ree/core/text.h: names made safe for one-line messages.
#include "ree/core/text.h"

#include <gtest/gtest.h>

#include <string>

namespace ree {
namespace {

TEST(PrintableText, PrintableAsciiIsKept) {
  EXPECT_EQ(printableText("model.layers.0.weight"), "model.layers.0.weight");
  EXPECT_EQ(printableText(""), "");
}

TEST(PrintableText, ControlNonAsciiAndBackslashAreEscaped) {
  EXPECT_EQ(printableText("a\nb"), "a\\x0ab");
  EXPECT_EQ(printableText(std::string("x\0y", 3)), "x\\x00y");
  EXPECT_EQ(printableText("\x1b[31m"), "\\x1b[31m");
  EXPECT_EQ(printableText("\xc3\xa9"), "\\xc3\\xa9");
  EXPECT_EQ(printableText("a\\b"), "a\\x5cb");
  EXPECT_EQ(printableText("\x7f"), "\\x7f");
}

TEST(PrintableText, LongTextIsCutWithAnEllipsis) {
  EXPECT_EQ(printableText(std::string(10, 'n'), 4), "nnnn...");
  EXPECT_EQ(printableText(std::string(4, 'n'), 4), "nnnn");
  const std::string cut = printableText(std::string(1000, 'z'));
  EXPECT_EQ(cut, std::string(160, 'z') + "...");
}

TEST(PrintableText, TheResultNeverBreaksALine) {
  std::string every_byte;
  for (int c = 0; c < 256; ++c)
    every_byte += static_cast<char>(c);
  const std::string out = printableText(every_byte, 10000);
  for (char c : out) {
    const auto byte = static_cast<unsigned char>(c);
    EXPECT_TRUE(byte >= 0x20 && byte < 0x7f) << static_cast<int>(byte);
  }
}

}  // namespace
}  // namespace ree
