// Page images: what a rendered page becomes before it goes to the provider, the encoders
// that make it (libpng, libjpeg-turbo) and the reading of an encoded image's size from its
// header (the provider stand-in bills by it; fairlane checks what it stores).
//
// Thread safety: pure functions of their arguments; any number of threads may call them at
// once on different inputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fairlane/core/page_image.hpp"
#include "fairlane/core/result.hpp"

namespace fairlane {

// 8-bit grayscale pixels, row after row, `stride` bytes from one row's start to the next
// (>= width). Not owned.
struct GrayPixels {
  const unsigned char* data = nullptr;
  std::int64_t width = 0;
  std::int64_t height = 0;
  std::size_t stride = 0;
};

// A grayscale PNG (8 bits a pixel, zlib level 6, adaptive filters). invalid_argument for an
// empty or oversized image (either side past 65,535), internal when libpng fails.
[[nodiscard]] Result<std::string> encode_png(const GrayPixels& pixels);

// A grayscale baseline JPEG at `quality` (1-100). The same errors as encode_png.
[[nodiscard]] Result<std::string> encode_jpeg(const GrayPixels& pixels, int quality = 80);

// The smaller of the two encodings, as a PageImage: the PNG unless the JPEG is less than
// half its size (a photograph or a noisy scan, where PNG's lossless bytes buy nothing a
// reader sees), since text keeps its edges sharp in PNG.
[[nodiscard]] Result<PageImage> encode_page_image(const GrayPixels& pixels);

// The media type and size an encoded PNG or JPEG announces in its header (PNG: IHDR; JPEG:
// the first SOFn marker). nullopt for anything else or a header cut short. Reads no more
// than the header; never decodes the pixels.
struct ImageHeader {
  std::string_view media_type;  // "image/png" or "image/jpeg"
  std::int64_t width = 0;
  std::int64_t height = 0;
};
[[nodiscard]] std::optional<ImageHeader> read_image_header(std::string_view bytes);

}  // namespace fairlane
