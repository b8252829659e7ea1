#include <doctest/doctest.h>

#include <cstddef>
#include <cstdlib>
#include <string>
#include <vector>

#include "book.hpp"
#include "book_pdf.hpp"
#include "document/pdf_writer.hpp"
#include "fairlane/document/document.hpp"
#include "support/pdf_pages.hpp"

using fairlane::pdfgen::BookPdfOptions;
using fairlane::pdfgen::PageKind;
using fairlane::pdfgen::parse_page_kinds;
using fairlane::pdfgen::write_book_pdf;
using fairlane::testing::see_pdf;

namespace {

std::vector<PageKind> kinds(const std::string& letters) {
  auto parsed = parse_page_kinds(letters);
  REQUIRE(parsed.has_value());
  return *parsed;
}

BookPdfOptions seeded(std::uint64_t seed) {
  BookPdfOptions options;
  options.seed = seed;
  return options;
}

// The share of 8 x 8 pixel blocks of two renderings of one size whose mean greys differ by
// more than 24 levels. Blocks, not pixels: poppler draws an image with its own smoothing, so
// a scan's glyph edges differ from the typeset page's by a few levels everywhere, but a
// block holds as much ink in both; another page's text puts ink in other blocks.
double blocks_differing(const fairlane::testing::PdfPageSeen& a,
                        const fairlane::testing::PdfPageSeen& b) {
  REQUIRE(a.width_px == b.width_px);
  REQUIRE(a.height_px == b.height_px);
  constexpr int kBlock = 8;
  const auto mean = [](const fairlane::testing::PdfPageSeen& page, int x0, int y0) {
    int sum = 0;
    for (int y = y0; y < y0 + kBlock; ++y) {
      for (int x = x0; x < x0 + kBlock; ++x) {
        sum += page.gray[static_cast<std::size_t>(y) * static_cast<std::size_t>(page.width_px) +
                         static_cast<std::size_t>(x)];
      }
    }
    return sum / (kBlock * kBlock);
  };
  int blocks = 0;
  int differ = 0;
  for (int y = 0; y + kBlock <= a.height_px; y += kBlock) {
    for (int x = 0; x + kBlock <= a.width_px; x += kBlock) {
      ++blocks;
      if (std::abs(mean(a, x, y) - mean(b, x, y)) > 24) ++differ;
    }
  }
  return static_cast<double>(differ) / blocks;
}

}  // namespace

TEST_CASE("pdfgen: page kinds are one letter a page, t s or b, and nothing else") {
  CHECK(kinds("tsbt") ==
        std::vector<PageKind>{PageKind::text, PageKind::scanned, PageKind::blank, PageKind::text});
  CHECK(kinds("").empty());
  CHECK_FALSE(parse_page_kinds("tsx").has_value());
  CHECK_FALSE(parse_page_kinds("T").has_value());
  CHECK_FALSE(parse_page_kinds("t s").has_value());
}

TEST_CASE("pdfgen: a book of text pages alone is write_pdf's book, byte for byte") {
  BookPdfOptions options = seeded(5);
  options.pdf = {.title = "Text", .locked = true};
  CHECK(write_book_pdf(kinds("ttt"), options) ==
        fairlane::write_pdf(fairlane::pdfgen::generate_book(3, 5), options.pdf));
  CHECK(write_book_pdf(kinds("bb"), options) == fairlane::write_pdf({"", ""}, options.pdf));
}

TEST_CASE(
    "pdfgen: a scanned book has no text layer but ink on every page, at the text book's page "
    "size") {
  const std::string pdf = write_book_pdf(kinds("sss"), seeded(9));
  const auto seen = see_pdf(pdf);
  REQUIRE(seen.size() == 3);
  for (std::size_t i = 0; i < seen.size(); ++i) {
    CAPTURE(i);
    CHECK(seen[i].text.empty());
    CHECK(seen[i].ink() > 0.01);
    CHECK(seen[i].width_pt == 612);
    CHECK(seen[i].height_pt == 792);
  }
  // The images are rendered at 100 dpi: 8.5 x 11 inches.
  CHECK(pdf.find("/Width 850 /Height 1100 /ColorSpace /DeviceGray /BitsPerComponent 8 "
                 "/Filter /FlateDecode ") != std::string::npos);
  const auto split = fairlane::split_pdf(pdf);
  REQUIRE_FALSE(split.ok());
  CHECK(split.status().message() ==
        "the PDF has no text layer (scanned images?): run it through OCR first");
}

TEST_CASE("pdfgen: a scanned page is its text page drawn, so it says Page K of N in its image") {
  // Rendered at the scan's own 100 dpi, each scan is the picture of its own text page, bar
  // the specks and poppler's smoothing, and clearly not the picture of any other.
  const std::string scans = write_book_pdf(kinds("sss"), seeded(3));
  const std::string text = write_book_pdf(kinds("ttt"), seeded(3));
  const auto scanned = see_pdf(scans, 100);
  const auto typeset = see_pdf(text, 100);
  REQUIRE(scanned.size() == 3);
  REQUIRE(typeset.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(typeset[i].text.starts_with("Page " + std::to_string(i + 1) + " of 3\n"));
    CHECK(blocks_differing(scanned[i], typeset[i]) < 0.005);
    CHECK(blocks_differing(scanned[i], typeset[(i + 1) % 3]) > 0.03);
  }
}

TEST_CASE("pdfgen: a mixed book's pages come out of the kinds asked for, in order") {
  const std::string pdf = write_book_pdf(kinds("tsbts"), seeded(11));
  const auto seen = see_pdf(pdf);
  REQUIRE(seen.size() == 5);
  CHECK(seen[0].text.starts_with("Page 1 of 5"));
  CHECK(seen[3].text.starts_with("Page 4 of 5"));
  for (const std::size_t text : {0u, 3u}) CHECK(seen[text].ink() > 0.01);
  for (const std::size_t scan : {1u, 4u}) {
    CAPTURE(scan);
    CHECK(seen[scan].text.empty());
    CHECK(seen[scan].ink() > 0.01);
  }
  CHECK(seen[2].text.empty());
  CHECK(seen[2].ink() == 0);
  std::size_t white = 0;
  for (const unsigned char v : seen[2].gray) white += v == 255 ? 1 : 0;
  CHECK(white == seen[2].gray.size());
  // fairlane's reader finds the text pages' text where they are, and nothing elsewhere.
  const auto split = fairlane::split_pdf(pdf);
  REQUIRE(split.ok());
  REQUIRE(split->size() == 5);
  CHECK((*split)[0].starts_with("Page 1 of 5\n"));
  CHECK((*split)[1].empty());
  CHECK((*split)[2].empty());
  CHECK((*split)[3].starts_with("Page 4 of 5\n"));
  CHECK((*split)[4].empty());
}

TEST_CASE(
    "pdfgen: the same seed gives the same scanned book byte for byte, another seed other specks") {
  const std::string book = write_book_pdf(kinds("st"), seeded(21));
  CHECK(write_book_pdf(kinds("st"), seeded(21)) == book);
  BookPdfOptions clean = seeded(21);
  clean.specks = false;
  CHECK(write_book_pdf(kinds("st"), clean) != book);
  CHECK(write_book_pdf(kinds("st"), seeded(22)) != book);
}

TEST_CASE(
    "pdfgen: huge pages keep their size, and their scans are no more than 4000 pixels a side") {
  BookPdfOptions options = seeded(1);
  options.width_pt = 14400;
  options.height_pt = 14400;
  const std::string pdf = write_book_pdf(kinds("tsb"), options);
  CHECK(pdf.find("/Width 4000 /Height 4000 ") != std::string::npos);
  const auto seen = see_pdf(pdf, 2);
  REQUIRE(seen.size() == 3);
  for (const auto& page : seen) {
    CHECK(page.width_pt == 14400);
    CHECK(page.height_pt == 14400);
  }
  CHECK(seen[0].text.starts_with("Page 1 of 3"));
  CHECK(seen[1].text.empty());
  CHECK(seen[2].text.empty());
}
