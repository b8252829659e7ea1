// Page images: each encoding read back by the library that reads it (libpng, libjpeg), the
// choice between them, and the header reader on real and hand-made files.
#include <doctest/doctest.h>

// jpeglib.h uses size_t and FILE without declaring them.
#include <cstdio>

#include <jpeglib.h>
#include <png.h>

#include <algorithm>
#include <array>
#include <csetjmp>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fairlane/document/image.hpp"

using fairlane::encode_jpeg;
using fairlane::encode_page_image;
using fairlane::encode_png;
using fairlane::GrayPixels;
using fairlane::read_image_header;
using fairlane::StatusCode;

namespace {

// A grayscale image that owns its pixels, `stride` bytes a row.
struct Image {
  Image(std::int64_t w, std::int64_t h, std::size_t row_bytes, unsigned char fill)
      : width(w),
        height(h),
        stride(row_bytes),
        pixels(row_bytes * static_cast<std::size_t>(h), fill) {}
  Image(std::int64_t w, std::int64_t h, unsigned char fill)
      : Image(w, h, static_cast<std::size_t>(w), fill) {}

  unsigned char& at(std::int64_t x, std::int64_t y) {
    return pixels[static_cast<std::size_t>(y) * stride + static_cast<std::size_t>(x)];
  }
  [[nodiscard]] GrayPixels view() const { return GrayPixels{pixels.data(), width, height, stride}; }

  std::int64_t width;
  std::int64_t height;
  std::size_t stride;
  std::vector<unsigned char> pixels;
};

// A page of text as a scan without noise shows it: white, with black "words" on lines.
Image text_page() {
  Image page(600, 800, 255);
  for (std::int64_t line = 60; line + 14 < 760; line += 28) {
    for (std::int64_t x = 50; x + 40 < 550; x += 55) {
      for (std::int64_t y = line; y < line + 14; ++y) {
        for (std::int64_t dx = 0; dx < 40 - (x % 3) * 7; ++dx) page.at(x + dx, y) = 0;
      }
    }
  }
  return page;
}

// A photograph, or a noisy scan: a smooth gradient under grain.
Image noisy_page() {
  Image page(600, 800, 0);
  std::mt19937 rng(7);
  std::normal_distribution<double> grain(0.0, 12.0);
  for (std::int64_t y = 0; y < page.height; ++y) {
    for (std::int64_t x = 0; x < page.width; ++x) {
      const double value =
          60.0 + 0.15 * static_cast<double>(x) + 0.1 * static_cast<double>(y) + grain(rng);
      page.at(x, y) = static_cast<unsigned char>(std::clamp(value, 0.0, 255.0));
    }
  }
  return page;
}

// A PNG decoded by libpng's simplified API: width, height and 8-bit gray pixels.
struct Decoded {
  std::int64_t width = 0;
  std::int64_t height = 0;
  std::vector<unsigned char> pixels;  // width bytes a row
};

std::optional<Decoded> decode_png(const std::string& bytes) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  if (png_image_begin_read_from_memory(&image, bytes.data(), bytes.size()) == 0)
    return std::nullopt;
  image.format = PNG_FORMAT_GRAY;
  Decoded decoded{image.width, image.height, std::vector<unsigned char>(PNG_IMAGE_SIZE(image))};
  if (png_image_finish_read(&image, nullptr, decoded.pixels.data(), 0, nullptr) == 0) {
    png_image_free(&image);
    return std::nullopt;
  }
  return decoded;
}

// libjpeg's decoder, failing by a jump back to decode_jpeg_into (no C++ object in its frame).
struct JpegTrap {
  jpeg_error_mgr manager{};
  std::jmp_buf jump{};
};

[[noreturn]] void jump_back(j_common_ptr cinfo) {
  // NOLINTNEXTLINE(cert-err52-cpp): libjpeg's errors must not return (src/document/image.cpp)
  std::longjmp(reinterpret_cast<JpegTrap*>(cinfo->err)->jump, 1);
}

void read_jpeg_rows(jpeg_decompress_struct* cinfo, unsigned char* out) {
  while (cinfo->output_scanline < cinfo->output_height) {
    JSAMPROW row = out + static_cast<std::size_t>(cinfo->output_scanline) * cinfo->output_width;
    jpeg_read_scanlines(cinfo, &row, 1);
  }
}

bool decode_jpeg_into(jpeg_decompress_struct* cinfo, JpegTrap* trap, const std::string* bytes,
                      std::vector<unsigned char>* pixels, std::int64_t* width,
                      std::int64_t* height) {
  // NOLINTNEXTLINE(cert-err52-cpp): see jump_back
  if (setjmp(trap->jump) != 0) return false;
  jpeg_create_decompress(cinfo);
  jpeg_mem_src(cinfo, reinterpret_cast<const unsigned char*>(bytes->data()), bytes->size());
  jpeg_read_header(cinfo, TRUE);
  cinfo->out_color_space = JCS_GRAYSCALE;
  jpeg_start_decompress(cinfo);
  *width = cinfo->output_width;
  *height = cinfo->output_height;
  pixels->resize(static_cast<std::size_t>(*width * *height));
  read_jpeg_rows(cinfo, pixels->data());
  jpeg_finish_decompress(cinfo);
  return true;
}

std::optional<Decoded> decode_jpeg(const std::string& bytes) {
  jpeg_decompress_struct cinfo{};
  JpegTrap trap;
  cinfo.err = jpeg_std_error(&trap.manager);
  trap.manager.error_exit = jump_back;
  Decoded decoded;
  const bool ok =
      decode_jpeg_into(&cinfo, &trap, &bytes, &decoded.pixels, &decoded.width, &decoded.height);
  jpeg_destroy_decompress(&cinfo);
  if (!ok) return std::nullopt;
  return decoded;
}

std::string bytes_of(std::initializer_list<int> values) {
  std::string out;
  for (const int v : values) out.push_back(static_cast<char>(v));
  return out;
}

// A hand-made JPEG start: SOI, `middle`, then a baseline frame of `width` x `height`.
std::string jpeg_with(const std::string& middle, int frame_marker = 0xC0, int width = 300,
                      int height = 200) {
  return bytes_of({0xFF, 0xD8}) + middle +
         bytes_of({0xFF, frame_marker, 0x00, 0x0B, 0x08, height >> 8, height & 0xFF, width >> 8,
                   width & 0xFF, 0x01, 0x01, 0x11, 0x00});
}

}  // namespace

TEST_CASE("encode_png: libpng reads back the same pixels, and the header gives the size") {
  Image image(37, 23, 0);
  for (std::int64_t y = 0; y < image.height; ++y) {
    for (std::int64_t x = 0; x < image.width; ++x)
      image.at(x, y) = static_cast<unsigned char>(x * 7 + y * 3);
  }
  const auto png = encode_png(image.view());
  REQUIRE(png.ok());
  const auto header = read_image_header(*png);
  REQUIRE(header.has_value());
  CHECK(header->media_type == "image/png");
  CHECK(header->width == 37);
  CHECK(header->height == 23);
  const auto decoded = decode_png(*png);
  REQUIRE(decoded.has_value());
  CHECK(decoded->width == 37);
  CHECK(decoded->height == 23);
  CHECK(decoded->pixels == image.pixels);
}

TEST_CASE("encode_png: a stride longer than a row encodes only the row's pixels") {
  Image image(30, 10, 48, 0xAA);  // 18 bytes past each row that are not the image's
  for (std::int64_t y = 0; y < image.height; ++y) {
    for (std::int64_t x = 0; x < image.width; ++x)
      image.at(x, y) = static_cast<unsigned char>(x + 10 * y);
  }
  const auto png = encode_png(image.view());
  REQUIRE(png.ok());
  const auto decoded = decode_png(*png);
  REQUIRE(decoded.has_value());
  REQUIRE(decoded->pixels.size() == 300);
  for (std::int64_t y = 0; y < image.height; ++y) {
    for (std::int64_t x = 0; x < image.width; ++x) {
      CHECK(decoded->pixels[static_cast<std::size_t>(y * 30 + x)] == image.at(x, y));
    }
  }
}

TEST_CASE("encode_jpeg: libjpeg decodes it to the same size, close to the pixels") {
  Image image(40, 48, 64, 0xAA);  // a stride of 64 for 40 pixels a row
  for (std::int64_t y = 0; y < image.height; ++y) {
    for (std::int64_t x = 0; x < image.width; ++x)
      image.at(x, y) = static_cast<unsigned char>(100 + x + y);
  }
  const auto jpeg = encode_jpeg(image.view(), 90);
  REQUIRE(jpeg.ok());
  const auto header = read_image_header(*jpeg);
  REQUIRE(header.has_value());
  CHECK(header->media_type == "image/jpeg");
  CHECK(header->width == 40);
  CHECK(header->height == 48);
  const auto decoded = decode_jpeg(*jpeg);
  REQUIRE(decoded.has_value());
  CHECK(decoded->width == 40);
  CHECK(decoded->height == 48);
  // Lossy, but a smooth gradient comes back within a few levels.
  std::int64_t error = 0;
  for (std::int64_t y = 0; y < 48; ++y) {
    for (std::int64_t x = 0; x < 40; ++x) {
      error += std::abs(int{decoded->pixels[static_cast<std::size_t>(y * 40 + x)]} -
                        int{image.at(x, y)});
    }
  }
  CHECK(error < 4 * 40 * 48);
}

TEST_CASE("encode_page_image: a page of text stays PNG, a noisy page goes as JPEG") {
  const Image text = text_page();
  const auto text_image = encode_page_image(text.view());
  REQUIRE(text_image.ok());
  CHECK(text_image->media_type == "image/png");
  CHECK(text_image->width == 600);
  CHECK(text_image->height == 800);
  CHECK(decode_png(text_image->bytes).has_value());

  const Image noisy = noisy_page();
  const auto noisy_image = encode_page_image(noisy.view());
  REQUIRE(noisy_image.ok());
  CHECK(noisy_image->media_type == "image/jpeg");
  CHECK(noisy_image->width == 600);
  CHECK(noisy_image->height == 800);
  const auto header = read_image_header(noisy_image->bytes);
  REQUIRE(header.has_value());
  CHECK(header->media_type == "image/jpeg");
  CHECK(header->width == 600);
  CHECK(header->height == 800);
  // The choice, in numbers: the JPEG is less than half the PNG.
  const auto png = encode_png(noisy.view());
  REQUIRE(png.ok());
  CHECK(2 * noisy_image->bytes.size() < png->size());
}

TEST_CASE("The encoders refuse an empty, oversized or mis-strided image, and a bad quality") {
  const std::array<unsigned char, 16> some{};
  const auto refused = [](const fairlane::Result<std::string>& encoded) {
    REQUIRE_FALSE(encoded.ok());
    CHECK(encoded.status().code() == StatusCode::invalid_argument);
  };
  for (const GrayPixels& bad :
       {GrayPixels{nullptr, 4, 4, 4}, GrayPixels{some.data(), 0, 4, 4},
        GrayPixels{some.data(), 4, 0, 4}, GrayPixels{some.data(), 65'536, 1, 65'536},
        GrayPixels{some.data(), 1, 65'536, 1}, GrayPixels{some.data(), 4, 4, 3}}) {
    CAPTURE(bad.width);
    CAPTURE(bad.height);
    refused(encode_png(bad));
    refused(encode_jpeg(bad));
    CHECK_FALSE(encode_page_image(bad).ok());
  }
  // JPEG itself stops at 65,500 pixels a side.
  refused(encode_jpeg(GrayPixels{some.data(), 65'501, 1, 65'501}));
  const GrayPixels good{some.data(), 4, 4, 4};
  refused(encode_jpeg(good, 0));
  refused(encode_jpeg(good, 101));
  CHECK(encode_jpeg(good, 1).ok());
  CHECK(encode_jpeg(good, 100).ok());
}

TEST_CASE("read_image_header: a header cut short is nullopt, at every length") {
  Image image(20, 10, 128);
  const auto png = encode_png(image.view());
  REQUIRE(png.ok());
  for (std::size_t n = 0; n < 24; ++n)
    CHECK_FALSE(read_image_header(png->substr(0, n)).has_value());
  CHECK(read_image_header(png->substr(0, 24)).has_value());

  const auto jpeg = encode_jpeg(image.view());
  REQUIRE(jpeg.ok());
  // The frame's segment must be whole: SOF0's marker, then 11 bytes for one component.
  const std::size_t sof = jpeg->find("\xFF\xC0");
  REQUIRE(sof != std::string::npos);
  for (std::size_t n = 0; n < sof + 2 + 11; ++n) {
    CAPTURE(n);
    CHECK_FALSE(read_image_header(jpeg->substr(0, n)).has_value());
  }
  const auto header = read_image_header(jpeg->substr(0, sof + 2 + 11));
  REQUIRE(header.has_value());
  CHECK(header->width == 20);
  CHECK(header->height == 10);
}

TEST_CASE("read_image_header: a PNG's IHDR must come first, with a size") {
  Image image(5, 3, 0);
  const auto png = encode_png(image.view());
  REQUIRE(png.ok());
  std::string wrong_chunk = *png;
  wrong_chunk[12] = 'i';
  CHECK_FALSE(read_image_header(wrong_chunk).has_value());
  std::string no_width = *png;
  no_width.replace(16, 4, std::string(4, '\0'));
  CHECK_FALSE(read_image_header(no_width).has_value());
  std::string huge = *png;
  huge[16] = static_cast<char>(0x80);  // past 2^31 - 1
  CHECK_FALSE(read_image_header(huge).has_value());
  std::string bad_signature = *png;
  bad_signature[1] = 'Q';
  CHECK_FALSE(read_image_header(bad_signature).has_value());
  CHECK_FALSE(read_image_header("GIF89a and the rest of a GIF").has_value());
}

TEST_CASE("read_image_header: JPEG markers are walked to the first frame") {
  const auto size_of =
      [](const std::string& bytes) -> std::optional<std::pair<std::int64_t, std::int64_t>> {
    const auto header = read_image_header(bytes);
    if (!header) return std::nullopt;
    CHECK(header->media_type == "image/jpeg");
    return std::pair{header->width, header->height};
  };
  const std::pair<std::int64_t, std::int64_t> expected{300, 200};
  CHECK(size_of(jpeg_with("")) == expected);
  // An APP0 segment, then fill bytes before the frame's marker.
  CHECK(size_of(jpeg_with(bytes_of({0xFF, 0xE0, 0x00, 0x04, 'J', 'F', 0xFF, 0xFF}))) == expected);
  // DHT (C4), JPG (C8) and DAC (CC) are in the frames' range but are not frames.
  for (const int not_a_frame : {0xC4, 0xC8, 0xCC}) {
    CAPTURE(not_a_frame);
    const std::string segment = bytes_of(
        {0xFF, not_a_frame, 0x00, 0x0B, 0x08, 0x00, 0x07, 0x00, 0x09, 0x01, 0x01, 0x11, 0x00});
    CHECK(size_of(jpeg_with(segment)) == expected);
  }
  // TEM and RST0-7 stand alone, without a length.
  CHECK(size_of(jpeg_with(bytes_of({0xFF, 0x01, 0xFF, 0xD0, 0xFF, 0xD7}))) == expected);
  // Every other start of frame: progressive (C2), lossless (C3), arithmetic (C9, CF).
  for (const int frame : {0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}) {
    CAPTURE(frame);
    CHECK(size_of(jpeg_with("", frame)) == expected);
  }
  CHECK(size_of(jpeg_with("", 0xC0, 65'535, 1)) ==
        std::pair<std::int64_t, std::int64_t>{65'535, 1});

  // Scan data, EOI or a second SOI before any frame; a stuffed zero outside a scan.
  for (const int ends : {0xDA, 0xD9, 0xD8, 0x00}) {
    CAPTURE(ends);
    CHECK_FALSE(size_of(jpeg_with(bytes_of({0xFF, ends, 0x00, 0x02}))).has_value());
  }
  // A segment whose length runs past the end, or is less than its own two bytes.
  CHECK_FALSE(size_of(bytes_of({0xFF, 0xD8, 0xFF, 0xE0, 0x10, 0x00, 0x00})).has_value());
  CHECK_FALSE(size_of(jpeg_with(bytes_of({0xFF, 0xE0, 0x00, 0x01}))).has_value());
  // Bytes between segments that are not a marker.
  CHECK_FALSE(size_of(jpeg_with(bytes_of({0x12, 0x34}))).has_value());
  // A height of 0 (given later by DNL) or a width of 0.
  CHECK_FALSE(size_of(jpeg_with("", 0xC0, 300, 0)).has_value());
  CHECK_FALSE(size_of(jpeg_with("", 0xC0, 0, 200)).has_value());
  // Fill bytes to the end, a frame too short to hold its size.
  CHECK_FALSE(size_of(bytes_of({0xFF, 0xD8, 0xFF, 0xFF, 0xFF})).has_value());
  CHECK_FALSE(
      size_of(bytes_of({0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x05, 0x08, 0x00, 0x10})).has_value());
  CHECK_FALSE(size_of(bytes_of({0xFF})).has_value());
  CHECK_FALSE(size_of("").has_value());
}
