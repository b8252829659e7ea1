// The PDF of a generated book whose pages are each of a chosen kind: text (a text layer, as
// write_pdf writes it), scanned (the same page drawn as an 8-bit gray image with no text
// layer, like a scan without OCR: poppler renders the text page and a few grey specks are
// added) or blank (no text and no ink). Text and scanned pages say "Page K of N", as text
// or in their image, so a test can check the order of what comes back.
//
// Thread safety: pure functions of their arguments (poppler allows different documents on
// different threads; each call renders its own).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "document/pdf_writer.hpp"

namespace fairlane::pdfgen {

enum class PageKind : char { text = 't', scanned = 's', blank = 'b' };

// One kind per letter, page 1 first: 't' text, 's' scanned, 'b' blank ("tsbt": text,
// scanned, blank, text). nullopt for any other letter.
[[nodiscard]] std::optional<std::vector<PageKind>> parse_page_kinds(std::string_view letters);

struct BookPdfOptions {
  std::uint64_t seed = 1;  // of the text (generate_book) and of the scans' specks
  PdfWriterOptions pdf;    // the title, and `locked`
  // Every page's size in points, as PdfPage's (0: Letter's; text makes a page at least
  // Letter). A scanned page has its text page's size.
  int width_pt = 0;
  int height_pt = 0;
  // The resolution scanned pages are rendered at. Huge pages are rendered coarser, so that
  // no side of a scan passes kMaxScanSide_px.
  int scan_dpi = 100;
  bool specks = true;  // a few grey specks on each scan, as dust on a scanner's glass
};

inline constexpr int kMaxScanSide_px = 4000;

// A book of kinds.size() pages of generate_book(kinds.size(), seed)'s text, page K of the
// kind kinds[K-1]. All text pages at Letter size give write_pdf's bytes exactly. Throws
// std::runtime_error when poppler cannot render a page (a bug: the PDF is our own).
[[nodiscard]] std::string write_book_pdf(const std::vector<PageKind>& kinds,
                                         const BookPdfOptions& options);

}  // namespace fairlane::pdfgen
