// DecodePng on PNGs built here byte by byte: every filter type undone, RGB,
// RGBA, grey and palette pixels, and refusals of what it does not read.

#include "deploy/monitoring/png_image.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace gaptrain {
namespace {

std::string BigEndian32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

std::string Chunk(const std::string& type, const std::string& body) {
  const std::string typed = type + body;
  const uLong crc = crc32(0, reinterpret_cast<const Bytef*>(typed.data()), typed.size());
  return BigEndian32(body.size()) + typed + BigEndian32(static_cast<uint32_t>(crc));
}

// A PNG of `rows` (each a filter byte, then the row's filtered bytes).
std::string Png(uint32_t width, uint32_t height, int color_type, const std::string& rows,
                const std::string& palette = "", int interlace = 0) {
  std::string ihdr = BigEndian32(width) + BigEndian32(height);
  ihdr += {8, static_cast<char>(color_type), 0, 0, static_cast<char>(interlace)};
  uLongf size = compressBound(rows.size());
  std::string compressed(size, '\0');
  EXPECT_EQ(compress(reinterpret_cast<Bytef*>(&compressed[0]), &size,
                     reinterpret_cast<const Bytef*>(rows.data()), rows.size()),
            Z_OK);
  compressed.resize(size);
  std::string png = "\x89PNG\r\n\x1a\n";
  png += Chunk("IHDR", ihdr);
  if (!palette.empty()) png += Chunk("PLTE", palette);
  png += Chunk("IDAT", compressed) + Chunk("IEND", "");
  return png;
}

int Paeth(int a, int b, int c) {
  const int p = a + b - c;
  const int pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  return pa <= pb && pa <= pc ? a : (pb <= pc ? b : c);
}

// The rows of `pixels` (width * channels bytes each) as an encoder writes
// them, row y with filter type y % 5.
std::string Filtered(const std::vector<std::vector<int>>& pixels, size_t channels) {
  std::string out;
  std::vector<int> previous(pixels[0].size(), 0);
  for (size_t y = 0; y < pixels.size(); ++y) {
    const int filter = static_cast<int>(y % 5);
    out += static_cast<char>(filter);
    const std::vector<int>& row = pixels[y];
    for (size_t i = 0; i < row.size(); ++i) {
      const int a = i >= channels ? row[i - channels] : 0;
      const int b = previous[i];
      const int c = i >= channels ? previous[i - channels] : 0;
      const int predictor = filter == 0 ? 0
                            : filter == 1 ? a
                            : filter == 2 ? b
                            : filter == 3 ? (a + b) / 2
                                          : Paeth(a, b, c);
      out += static_cast<char>((row[i] - predictor) & 0xff);
    }
    previous = row;
  }
  return out;
}

TEST(PngImageTest, UndoesEveryFilterOnRgbAndRgba) {
  // 2 x 5 RGB: one row per filter type.
  const std::vector<std::vector<int>> rgb = {{10, 20, 30, 250, 240, 230},
                                             {11, 22, 33, 200, 100, 0},
                                             {255, 0, 128, 1, 2, 3},
                                             {90, 180, 45, 45, 180, 90},
                                             {7, 77, 177, 177, 77, 7}};
  PngImage image;
  Status s = DecodePng(Png(2, 5, 2, Filtered(rgb, 3)), &image);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(image.width, 2);
  ASSERT_EQ(image.height, 5);
  for (int y = 0; y < 5; ++y) {
    for (int x = 0; x < 2; ++x) {
      const std::vector<int>& r = rgb[y];
      const uint32_t want = (r[3 * x] << 16) | (r[3 * x + 1] << 8) | r[3 * x + 2];
      EXPECT_EQ(image.At(x, y), want) << x << "," << y;
    }
  }
  // RGBA: alpha dropped.
  s = DecodePng(Png(1, 2, 6, Filtered({{1, 2, 3, 0}, {4, 5, 6, 255}}, 4)), &image);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(image.At(0, 0), 0x010203u);
  EXPECT_EQ(image.At(0, 1), 0x040506u);
}

TEST(PngImageTest, GreyAndPalette) {
  PngImage image;
  ASSERT_TRUE(DecodePng(Png(2, 1, 0, Filtered({{0x40, 0xff}}, 1)), &image).ok());
  EXPECT_EQ(image.At(0, 0), 0x404040u);
  EXPECT_EQ(image.At(1, 0), 0xffffffu);
  const std::string palette = "\xc8\xc8\xc8\x2a\x7a\x2a";
  ASSERT_TRUE(DecodePng(Png(3, 1, 3, Filtered({{1, 0, 1}}, 1), palette), &image).ok());
  EXPECT_EQ(image.At(0, 0), 0x2a7a2au);
  EXPECT_EQ(image.At(1, 0), 0xc8c8c8u);
  // An index past the palette.
  EXPECT_EQ(DecodePng(Png(1, 1, 3, Filtered({{2}}, 1), palette), &image).code(),
            Status::Code::kDataLoss);
}

TEST(PngImageTest, RefusesWhatItDoesNotRead) {
  PngImage image;
  EXPECT_EQ(DecodePng("GIF89a", &image).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(DecodePng(Png(1, 1, 2, Filtered({{1, 2, 3}}, 3), "", 1), &image).code(),
            Status::Code::kInvalidArgument);  // interlaced
  const std::string whole = Png(1, 1, 2, Filtered({{1, 2, 3}}, 3));
  EXPECT_EQ(DecodePng(whole.substr(0, whole.size() - 12), &image).code(),
            Status::Code::kDataLoss);  // no IEND
  // Rows too short for the size the header gives.
  EXPECT_EQ(DecodePng(Png(2, 1, 2, Filtered({{1, 2, 3}}, 3)), &image).code(),
            Status::Code::kDataLoss);
}

}  // namespace
}  // namespace gaptrain
