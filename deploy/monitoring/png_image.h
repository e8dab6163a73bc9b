// ReadPng: the pixels of a PNG file, for tests that check where a picture
// was drawn (dashboard_png_test: each panel inside its gridPos). A small
// decoder for what gnuplot's png terminal writes, not a general one.
//
// What callers may rely on: 8-bit grey, grey+alpha, RGB, RGBA and
// palette images without interlacing decode exactly (every filter type);
// other bit depths and Adam7 are INVALID_ARGUMENT, a truncated or
// malformed file DATA_LOSS, never a crash. CRCs are not checked. Alpha
// is dropped: a pixel is its colour 0xRRGGBB.

#ifndef GAPTRAIN_DEPLOY_MONITORING_PNG_IMAGE_H_
#define GAPTRAIN_DEPLOY_MONITORING_PNG_IMAGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "services/base/status.h"

namespace gaptrain {

struct PngImage {
  int width = 0;
  int height = 0;
  std::vector<uint32_t> pixels;  // 0xRRGGBB, rows from the top, left to right

  // (x, y) counted from the top left corner; both in range.
  uint32_t At(int x, int y) const { return pixels[static_cast<size_t>(y) * width + x]; }
};

// Decodes the PNG file content `bytes`.
Status DecodePng(const std::string& bytes, PngImage* image);

}  // namespace gaptrain

#endif  // GAPTRAIN_DEPLOY_MONITORING_PNG_IMAGE_H_
