// Pages as the provider gets them: each page's kind under --page-input auto, text and image,
// the resolution pages are drawn at, and what counts as blank.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "document/pdf_writer.hpp"
#include "document/render.hpp"
#include "fairlane/document/document.hpp"
#include "fairlane/document/image.hpp"

using fairlane::DocumentPage;
using fairlane::GrayPixels;
using fairlane::PageInputMode;
using fairlane::PageKind;
using fairlane::PdfReading;
using fairlane::RenderOptions;
using fairlane::StatusCode;

namespace {

std::vector<PageKind> kinds(const std::vector<DocumentPage>& pages) {
  std::vector<PageKind> out;
  for (const DocumentPage& page : pages) out.push_back(page.kind);
  return out;
}

}  // namespace

TEST_CASE("render: pages are drawn at the DPI asked, lowered to keep the long edge in bounds") {
  const RenderOptions options;  // 150 DPI, 1568 px
  // US letter at 150 DPI: 1275 x 1650 px, within 1568? No: 1650 > 1568, so lowered.
  CHECK(fairlane::render::resolution(612, 792, options) == doctest::Approx(142.545).epsilon(1e-3));
  // A5 (420 x 595 pt) at 150 DPI is 875 x 1240 px: as asked.
  CHECK(fairlane::render::resolution(420, 595, options) == 150.0);
  // A huge page (200 in square) is drawn 1568 px a side at most, whatever its size.
  const double dpi = fairlane::render::resolution(14'400, 14'400, options);
  CHECK(14'400.0 / 72.0 * dpi <= 1568.0);
  CHECK(14'400.0 / 72.0 * dpi > 1567.0);
  // A degenerate page cannot ask for more than the DPI.
  CHECK(fairlane::render::resolution(0, 0, options) == 150.0);
}

TEST_CASE("render: faint marks on a page are ink, measured against its paper, not mid-grey") {
  const std::int64_t width = 500;
  const std::int64_t height = 400;
  std::vector<unsigned char> pixels(static_cast<std::size_t>(width * height), 250);
  const GrayPixels page{pixels.data(), width, height, static_cast<std::size_t>(width)};
  // Pencil, a faded copy or a thermal fax: strokes of grey 150 on paper of 250, over 1% of
  // the page. Nothing on it is darker than mid-grey, and a reader sees every stroke.
  for (std::size_t i = 0; i < pixels.size(); i += 100) pixels[i] = 150;
  CHECK_FALSE(fairlane::render::is_blank(page));
  CHECK(fairlane::render::ink_share(page) == doctest::Approx(0.01));
  // White writing on a black page is ink too; a page of one tone, whatever it is, is not.
  for (auto& p : pixels) p = 0;
  CHECK(fairlane::render::is_blank(page));
  for (std::size_t i = 0; i < pixels.size(); i += 100) pixels[i] = 255;
  CHECK_FALSE(fairlane::render::is_blank(page));
  // On yellowed paper (180), faded writing at 125 is ink, though within 64 of it; the paper's
  // own grain is not.
  for (std::size_t i = 0; i < pixels.size(); ++i) {
    pixels[i] = static_cast<unsigned char>(i % 100 == 0 ? 125 : 175 + i % 11);
  }
  CHECK_FALSE(fairlane::render::is_blank(page));
  CHECK(fairlane::render::ink_share(page) == doctest::Approx(0.01));
  // A scan's noise, a few levels either side of its paper, is not.
  for (std::size_t i = 0; i < pixels.size(); ++i)
    pixels[i] = static_cast<unsigned char>(230 + i % 21);
  CHECK(fairlane::render::is_blank(page));
}

TEST_CASE("render: a page is blank below 1 pixel in 50,000 of ink, not at it") {
  const std::int64_t width = 500;
  const std::int64_t height = 400;  // 200,000 pixels: blank below 4 dark ones
  std::vector<unsigned char> pixels(static_cast<std::size_t>(width * height), 255);
  const GrayPixels page{pixels.data(), width, height, static_cast<std::size_t>(width)};
  CHECK(fairlane::render::is_blank(page));
  // Light grey (a scan's paper) is not ink, however much of it.
  for (auto& p : pixels) p = 200;
  CHECK(fairlane::render::is_blank(page));
  for (int i = 0; i < 3; ++i) pixels[static_cast<std::size_t>(i * 997)] = 0;
  CHECK(fairlane::render::is_blank(page));
  pixels[5'000] = 100;
  CHECK_FALSE(fairlane::render::is_blank(page));
  CHECK(fairlane::render::ink_share(page) == doctest::Approx(4.0 / 200'000.0));
}

TEST_CASE("read_pdf: each page's kind under auto, text and image") {
  const std::string pdf = fairlane::write_pdf({"Page 1 of 3\nWords.", "", "Page 3 of 3"});

  const auto automatic = fairlane::read_pdf(pdf, PdfReading{});
  REQUIRE(automatic.ok());
  CHECK(kinds(*automatic) == std::vector{PageKind::text, PageKind::blank, PageKind::text});
  CHECK((*automatic)[0].text == "Page 1 of 3\nWords.\n");
  CHECK((*automatic)[1].text.empty());

  const auto text = fairlane::read_pdf(pdf, PdfReading{.input = PageInputMode::text});
  REQUIRE(text.ok());
  CHECK(kinds(*text) == std::vector{PageKind::text, PageKind::blank, PageKind::text});

  // Every page drawn; the one without text or ink is still blank.
  const auto image = fairlane::read_pdf(pdf, PdfReading{.input = PageInputMode::image});
  REQUIRE(image.ok());
  CHECK(kinds(*image) == std::vector{PageKind::image, PageKind::blank, PageKind::image});
  const auto& drawn = *(*image)[0].image;
  CHECK((*image)[0].text.empty());
  const auto header = fairlane::read_image_header(drawn.bytes);
  REQUIRE(header.has_value());
  CHECK(header->media_type == drawn.media_type);
  CHECK(header->width == drawn.width);
  CHECK(header->height == drawn.height);
  CHECK(std::max(drawn.width, drawn.height) <= 1568);
}

TEST_CASE("read_pdf: a PDF of blank pages only is refused, in the words of its mode") {
  const std::string pdf = fairlane::write_pdf({"", ""});
  const auto text = fairlane::read_pdf(pdf, PdfReading{.input = PageInputMode::text});
  REQUIRE_FALSE(text.ok());
  CHECK(text.status().code() == StatusCode::invalid_argument);
  CHECK(text.status().message() ==
        "the PDF has no text layer (scanned images?): run it through OCR first");
  for (const auto mode : {PageInputMode::automatic, PageInputMode::image}) {
    const auto read = fairlane::read_pdf(pdf, PdfReading{.input = mode});
    REQUIRE_FALSE(read.ok());
    CHECK(read.status().message().rfind("every page of the PDF is blank", 0) == 0);
  }
}

TEST_CASE("read_pdf: an image past max_image_bytes, or all of them past their total, is 413") {
  const std::string pdf = fairlane::write_pdf({"Page 1 of 2\nWords.", "Page 2 of 2\nMore."});
  const auto one =
      fairlane::read_pdf(pdf, PdfReading{.input = PageInputMode::image, .max_image_bytes = 100});
  REQUIRE_FALSE(one.ok());
  CHECK(one.status().code() == StatusCode::payload_too_large);
  CHECK(one.status().message().rfind("page 1's image is ", 0) == 0);

  const auto whole = fairlane::read_pdf(pdf, PdfReading{.input = PageInputMode::image});
  REQUIRE(whole.ok());
  const auto first = static_cast<std::int64_t>((*whole)[0].image->bytes.size());
  const auto both = fairlane::read_pdf(
      pdf, PdfReading{.input = PageInputMode::image, .max_total_bytes = first + 1});
  REQUIRE_FALSE(both.ok());
  CHECK(both.status().code() == StatusCode::payload_too_large);
  CHECK(both.status().message().find("by page 2") != std::string::npos);
}
