// Page images (fairlane/document/image.hpp): the PNG and JPEG encoders on libpng and
// libjpeg-turbo, and the header reader.
//
// Both C libraries report a failure by calling an error function that must not return;
// here it longjmps back to a setjmp. A longjmp that skips a C++ destructor is undefined, so
// each setjmp sits in a small function of its own (write_png, compress_jpeg) whose frame
// holds no object with a destructor and no local it changes after the setjmp (GCC's
// -Wclobbered), and every C++ object (the output string, the libraries' handles' guards)
// lives in the caller, which the jump never skips. The callbacks the libraries call between
// (the PNG writer) catch their own exceptions and jump only after the catch is done.
//
// Thread safety: each call has its own libpng and libjpeg objects; neither library keeps
// global state that encoding writes.
#include "fairlane/document/image.hpp"

// jpeglib.h uses size_t and FILE without declaring them.
#include <cstdio>

#include <jpeglib.h>
#include <png.h>

#include <array>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

namespace fairlane {
namespace {

constexpr std::int64_t kMaxSide = 65'535;
// libjpeg's own limit (JPEG_MAX_DIMENSION): a side past it is refused before libjpeg sees it.
constexpr std::int64_t kMaxJpegSide = 65'500;
constexpr std::string_view kPng = "image/png";
constexpr std::string_view kJpeg = "image/jpeg";

Status check_pixels(const GrayPixels& pixels, std::int64_t max_side) {
  if (pixels.data == nullptr || pixels.width < 1 || pixels.height < 1) {
    return {StatusCode::invalid_argument,
            fmt::format("an empty image ({} x {} pixels) cannot be encoded", pixels.width,
                        pixels.height)};
  }
  if (pixels.width > max_side || pixels.height > max_side) {
    return {StatusCode::invalid_argument,
            fmt::format("a {} x {} image is too large to encode: at most {} pixels a side",
                        pixels.width, pixels.height, max_side)};
  }
  if (pixels.stride < static_cast<std::size_t>(pixels.width)) {
    return {StatusCode::invalid_argument,
            fmt::format("a stride of {} bytes is shorter than a row of {} pixels", pixels.stride,
                        pixels.width)};
  }
  return {};
}

// --- PNG -----------------------------------------------------------------------------------

// What libpng said when it failed: copied into a fixed buffer, since the error function runs
// inside libpng and must neither throw nor allocate.
struct PngFailure {
  std::array<char, 200> message{};
};

[[noreturn]] void on_png_error(png_structp png, png_const_charp message) {
  auto* failure = static_cast<PngFailure*>(png_get_error_ptr(png));
  // Cut to the buffer if need be: its start says what failed.
  if (failure != nullptr) {
    static_cast<void>(
        std::snprintf(failure->message.data(), failure->message.size(), "%s", message));
  }
  png_longjmp(png, 1);
}

// Warnings (a chunk libpng does not know, say) are not worth a line of the server's log.
void on_png_warning(png_structp /*png*/, png_const_charp /*message*/) {}

void append_png_bytes(png_structp png, png_bytep data, png_size_t size) {
  auto* bytes = static_cast<std::string*>(png_get_io_ptr(png));
  bool appended = false;
  // No exception may cross libpng's C frames (std::bad_alloc is the one to expect).
  try {
    bytes->append(reinterpret_cast<const char*>(data), size);
    appended = true;
  } catch (...) {
  }
  // Jumps out only after the handler is done with the exception.
  if (!appended) png_error(png, "no memory for the encoded image");
}

void flush_nothing(png_structp /*png*/) {}

void write_png_rows(png_structp png, const GrayPixels& pixels) {
  for (std::int64_t y = 0; y < pixels.height; ++y) {
    png_write_row(png, pixels.data + static_cast<std::size_t>(y) * pixels.stride);
  }
}

// false when libpng failed. No object with a destructor lives in this frame (see the top).
bool write_png(png_structp png, png_infop info, const GrayPixels& pixels) {
  // NOLINTNEXTLINE(cert-err52-cpp): see the top of the file
  if (setjmp(png_jmpbuf(png)) != 0) return false;
  png_set_IHDR(png, info, static_cast<png_uint_32>(pixels.width),
               static_cast<png_uint_32>(pixels.height), 8, PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_set_compression_level(png, 6);
  png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_ALL_FILTERS);
  png_write_info(png, info);
  write_png_rows(png, pixels);
  png_write_end(png, info);
  return true;
}

// Destroys libpng's write and info structs when the encoding ends, however it ends.
class PngWriter {
 public:
  explicit PngWriter(PngFailure& failure)
      : png_(
            png_create_write_struct(PNG_LIBPNG_VER_STRING, &failure, on_png_error, on_png_warning)),
        info_(png_ != nullptr ? png_create_info_struct(png_) : nullptr) {}
  ~PngWriter() { png_destroy_write_struct(&png_, &info_); }
  PngWriter(const PngWriter&) = delete;
  PngWriter& operator=(const PngWriter&) = delete;

  [[nodiscard]] png_structp png() const { return png_; }
  [[nodiscard]] png_infop info() const { return info_; }

 private:
  png_structp png_;
  png_infop info_;
};

// --- JPEG ----------------------------------------------------------------------------------

// libjpeg's error manager, with where to jump and what it said. The manager comes first:
// libjpeg hands the error function a pointer to it, which is a pointer to the whole.
struct JpegFailure {
  jpeg_error_mgr manager{};
  std::jmp_buf jump{};
  std::array<char, JMSG_LENGTH_MAX> message{};
};

[[noreturn]] void on_jpeg_error(j_common_ptr cinfo) {
  auto* failure = reinterpret_cast<JpegFailure*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, failure->message.data());
  std::longjmp(failure->jump, 1);  // NOLINT(cert-err52-cpp): see the top of the file
}

// libjpeg's warnings and traces would go to stderr; an encoder has nothing to tell a reader.
void ignore_jpeg_message(j_common_ptr /*cinfo*/, int /*level*/) {}

void write_jpeg_rows(jpeg_compress_struct* cinfo, const GrayPixels& pixels) {
  while (cinfo->next_scanline < cinfo->image_height) {
    // libjpeg takes rows as non-const pointers but only reads them.
    JSAMPROW row = const_cast<JSAMPROW>(pixels.data) +
                   static_cast<std::size_t>(cinfo->next_scanline) * pixels.stride;
    jpeg_write_scanlines(cinfo, &row, 1);
  }
}

// false when libjpeg failed. No object with a destructor lives in this frame (see the top).
bool compress_jpeg(jpeg_compress_struct* cinfo, JpegFailure* failure, const GrayPixels& pixels,
                   int quality, unsigned char** out, unsigned long* out_size) {
  // NOLINTNEXTLINE(cert-err52-cpp): see the top of the file
  if (setjmp(failure->jump) != 0) return false;
  jpeg_create_compress(cinfo);
  jpeg_mem_dest(cinfo, out, out_size);
  cinfo->image_width = static_cast<JDIMENSION>(pixels.width);
  cinfo->image_height = static_cast<JDIMENSION>(pixels.height);
  cinfo->input_components = 1;
  cinfo->in_color_space = JCS_GRAYSCALE;
  jpeg_set_defaults(cinfo);
  jpeg_set_quality(cinfo, quality, TRUE);
  jpeg_start_compress(cinfo, TRUE);
  write_jpeg_rows(cinfo, pixels);
  jpeg_finish_compress(cinfo);
  return true;
}

// The compressor and the buffer jpeg_mem_dest allocates (and grows), freed however the
// encoding ends. jpeg_destroy_compress is safe on a struct jpeg_create_compress never
// reached, since it starts zeroed (its `mem` is null).
struct JpegCompressor {
  jpeg_compress_struct cinfo{};
  JpegFailure failure{};
  unsigned char* out = nullptr;
  unsigned long out_size = 0;  // NOLINT(google-runtime-int): jpeg_mem_dest's type

  JpegCompressor() {
    cinfo.err = jpeg_std_error(&failure.manager);
    failure.manager.error_exit = on_jpeg_error;
    failure.manager.emit_message = ignore_jpeg_message;
  }
  ~JpegCompressor() {
    jpeg_destroy_compress(&cinfo);
    std::free(out);  // NOLINT(cppcoreguidelines-no-malloc): libjpeg allocated it with malloc
  }
  JpegCompressor(const JpegCompressor&) = delete;
  JpegCompressor& operator=(const JpegCompressor&) = delete;
};

// --- Headers -------------------------------------------------------------------------------

std::int64_t big_endian(std::string_view bytes, std::size_t at, std::size_t size) {
  std::int64_t value = 0;
  for (std::size_t i = 0; i < size; ++i) {
    value = (value << 8) | static_cast<unsigned char>(bytes[at + i]);
  }
  return value;
}

// PNG: the 8-byte signature, then the IHDR chunk first (length 13), whose data starts with
// the width and height, 4 bytes each, big-endian, 1 to 2^31 - 1.
std::optional<ImageHeader> read_png_header(std::string_view bytes) {
  constexpr std::string_view kSignature = "\x89PNG\r\n\x1a\n";
  if (bytes.size() < 24 || bytes.substr(0, 8) != kSignature) return std::nullopt;
  if (big_endian(bytes, 8, 4) != 13 || bytes.substr(12, 4) != "IHDR") return std::nullopt;
  const std::int64_t width = big_endian(bytes, 16, 4);
  const std::int64_t height = big_endian(bytes, 20, 4);
  constexpr std::int64_t kMax = 0x7FFF'FFFF;
  if (width < 1 || height < 1 || width > kMax || height > kMax) return std::nullopt;
  return ImageHeader{kPng, width, height};
}

// JPEG: SOI, then marker segments (0xFF, the marker, a big-endian length that counts
// itself) up to the first start of frame, SOF0 to SOF15 but for DHT (C4), JPG (C8) and DAC
// (CC), which share the range. A frame gives precision (1 byte), height, width (2 each).
// Fill bytes (0xFF repeated) may precede a marker; TEM and RST0-7 stand alone, without a
// length. Scan data (SOS), EOI or a second SOI before any frame, a height of 0 (given later
// by DNL, past the header) or anything else unexpected is not a header this reads.
std::optional<ImageHeader> read_jpeg_header(std::string_view bytes) {
  if (bytes.size() < 2 || static_cast<unsigned char>(bytes[0]) != 0xFF ||
      static_cast<unsigned char>(bytes[1]) != 0xD8) {
    return std::nullopt;
  }
  std::size_t at = 2;
  while (true) {
    if (at >= bytes.size() || static_cast<unsigned char>(bytes[at]) != 0xFF) return std::nullopt;
    while (at < bytes.size() && static_cast<unsigned char>(bytes[at]) == 0xFF) ++at;
    if (at >= bytes.size()) return std::nullopt;
    const auto marker = static_cast<unsigned char>(bytes[at]);
    ++at;
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) continue;  // TEM, RSTn
    if (marker == 0x00 || marker == 0xD8 || marker == 0xD9 || marker == 0xDA) return std::nullopt;
    if (bytes.size() - at < 2) return std::nullopt;
    const auto length = static_cast<std::size_t>(big_endian(bytes, at, 2));
    if (length < 2 || bytes.size() - at < length) return std::nullopt;
    const bool frame =
        marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
    if (frame) {
      if (length < 8) return std::nullopt;
      const std::int64_t height = big_endian(bytes, at + 3, 2);
      const std::int64_t width = big_endian(bytes, at + 5, 2);
      if (width < 1 || height < 1) return std::nullopt;
      return ImageHeader{kJpeg, width, height};
    }
    at += length;
  }
}

}  // namespace

Result<std::string> encode_png(const GrayPixels& pixels) {
  if (Status checked = check_pixels(pixels, kMaxSide); !checked.ok()) return checked;
  PngFailure failure;
  PngWriter writer(failure);
  if (writer.png() == nullptr || writer.info() == nullptr) {
    return Status(StatusCode::internal, "libpng could not start a PNG (out of memory?)");
  }
  std::string bytes;
  png_set_write_fn(writer.png(), &bytes, append_png_bytes, flush_nothing);
  if (!write_png(writer.png(), writer.info(), pixels)) {
    return Status(StatusCode::internal,
                  fmt::format("libpng failed to encode the page: {}", failure.message.data()));
  }
  return bytes;
}

Result<std::string> encode_jpeg(const GrayPixels& pixels, int quality) {
  if (Status checked = check_pixels(pixels, kMaxJpegSide); !checked.ok()) return checked;
  if (quality < 1 || quality > 100) {
    return Status(StatusCode::invalid_argument,
                  fmt::format("a JPEG quality of {} is out of range: 1 to 100", quality));
  }
  JpegCompressor compressor;
  if (!compress_jpeg(&compressor.cinfo, &compressor.failure, pixels, quality, &compressor.out,
                     &compressor.out_size)) {
    return Status(StatusCode::internal, fmt::format("libjpeg failed to encode the page: {}",
                                                    compressor.failure.message.data()));
  }
  return std::string(reinterpret_cast<const char*>(compressor.out), compressor.out_size);
}

Result<PageImage> encode_page_image(const GrayPixels& pixels) {
  auto png = encode_png(pixels);
  if (!png.ok()) return png.status();
  auto jpeg = encode_jpeg(pixels);
  if (!jpeg.ok()) return jpeg.status();
  if (2 * jpeg->size() < png->size()) {
    return PageImage{std::string(kJpeg), pixels.width, pixels.height, std::move(jpeg).value()};
  }
  return PageImage{std::string(kPng), pixels.width, pixels.height, std::move(png).value()};
}

std::optional<ImageHeader> read_image_header(std::string_view bytes) {
  if (auto png = read_png_header(bytes)) return png;
  return read_jpeg_header(bytes);
}

}  // namespace fairlane
