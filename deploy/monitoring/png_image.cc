#include "deploy/monitoring/png_image.h"

#include <zlib.h>

#include <cstdlib>
#include <cstring>

namespace gaptrain {
namespace {

uint32_t BigEndian32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// The zlib stream `compressed` inflated into exactly `size` bytes.
Status Inflate(const std::string& compressed, size_t size, std::vector<unsigned char>* out) {
  out->assign(size, 0);
  z_stream z;
  std::memset(&z, 0, sizeof z);
  if (inflateInit(&z) != Z_OK) return Status::Internal("png: inflateInit failed");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  z.avail_in = static_cast<uInt>(compressed.size());
  z.next_out = out->data();
  z.avail_out = static_cast<uInt>(size);
  const int result = inflate(&z, Z_FINISH);
  const size_t produced = size - z.avail_out;
  inflateEnd(&z);
  if (result != Z_STREAM_END || produced != size) {
    return Status::DataLoss("png: the image data does not inflate to " + std::to_string(size) +
                            " bytes");
  }
  return Status::OK();
}

int Paeth(int a, int b, int c) {
  const int p = a + b - c;
  const int pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  if (pa <= pb && pa <= pc) return a;
  return pb <= pc ? b : c;
}

}  // namespace

Status DecodePng(const std::string& bytes, PngImage* image) {
  static const unsigned char kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() < 8 || std::memcmp(data, kSignature, 8) != 0) {
    return Status::InvalidArgument("png: no PNG signature");
  }
  uint32_t width = 0, height = 0;
  int color_type = -1;
  std::vector<uint32_t> palette;
  std::string compressed;
  bool ended = false;
  for (size_t at = 8; at + 12 <= bytes.size() && !ended;) {
    const uint32_t length = BigEndian32(data + at);
    if (length > bytes.size() - at - 12) return Status::DataLoss("png: a chunk runs past the end");
    const std::string type(bytes, at + 4, 4);
    const unsigned char* body = data + at + 8;
    if (type == "IHDR") {
      if (length != 13) return Status::DataLoss("png: IHDR of length " + std::to_string(length));
      width = BigEndian32(body);
      height = BigEndian32(body + 4);
      const int depth = body[8];
      color_type = body[9];
      if (depth != 8) return Status::InvalidArgument("png: bit depth " + std::to_string(depth));
      if (body[12] != 0) return Status::InvalidArgument("png: interlaced");
      if (color_type != 0 && color_type != 2 && color_type != 3 && color_type != 4 &&
          color_type != 6) {
        return Status::InvalidArgument("png: colour type " + std::to_string(color_type));
      }
      if (width == 0 || height == 0 || width > 16384 || height > 16384) {
        return Status::InvalidArgument("png: size " + std::to_string(width) + "x" +
                                       std::to_string(height));
      }
    } else if (type == "PLTE") {
      for (uint32_t i = 0; i + 3 <= length; i += 3) {
        palette.push_back((uint32_t{body[i]} << 16) | (uint32_t{body[i + 1]} << 8) | body[i + 2]);
      }
    } else if (type == "IDAT") {
      compressed.append(reinterpret_cast<const char*>(body), length);
    } else if (type == "IEND") {
      ended = true;
    }
    at += 12 + length;
  }
  if (color_type < 0) return Status::DataLoss("png: no IHDR");
  if (!ended) return Status::DataLoss("png: no IEND");
  if (color_type == 3 && palette.empty()) {
    return Status::DataLoss("png: palette image without PLTE");
  }

  static const int kChannels[] = {1, 0, 3, 1, 2, 0, 4};
  const size_t channels = kChannels[color_type];
  const size_t stride = width * channels;
  std::vector<unsigned char> raw;
  GAPTRAIN_RETURN_IF_ERROR(Inflate(compressed, (stride + 1) * height, &raw));

  PngImage out;
  out.width = static_cast<int>(width);
  out.height = static_cast<int>(height);
  out.pixels.resize(static_cast<size_t>(width) * height);
  std::vector<unsigned char> previous(stride, 0), line(stride);
  for (uint32_t y = 0; y < height; ++y) {
    const unsigned char* row = raw.data() + y * (stride + 1);
    const int filter = row[0];
    if (filter > 4) return Status::DataLoss("png: filter type " + std::to_string(filter));
    for (size_t i = 0; i < stride; ++i) {
      const int a = i >= channels ? line[i - channels] : 0;
      const int b = previous[i];
      const int c = i >= channels ? previous[i - channels] : 0;
      const int predictor = filter == 0   ? 0
                            : filter == 1 ? a
                            : filter == 2 ? b
                            : filter == 3 ? (a + b) / 2
                                          : Paeth(a, b, c);
      line[i] = static_cast<unsigned char>(row[1 + i] + predictor);
    }
    for (uint32_t x = 0; x < width; ++x) {
      const unsigned char* p = line.data() + x * channels;
      uint32_t rgb = 0;
      if (color_type == 3) {
        if (p[0] >= palette.size()) return Status::DataLoss("png: index past the palette");
        rgb = palette[p[0]];
      } else if (color_type == 0 || color_type == 4) {
        rgb = (uint32_t{p[0]} << 16) | (uint32_t{p[0]} << 8) | p[0];
      } else {
        rgb = (uint32_t{p[0]} << 16) | (uint32_t{p[1]} << 8) | p[2];
      }
      out.pixels[static_cast<size_t>(y) * width + x] = rgb;
    }
    previous.swap(line);
    line.assign(stride, 0);
  }
  *image = std::move(out);
  return Status::OK();
}

}  // namespace gaptrain
