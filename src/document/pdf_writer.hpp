// A writer of minimal PDFs with known content, for tests, samples and fairlane-pdfgen: PDF
// 1.4, one page per element. Text is set in Helvetica (a standard Type 1 font, not
// embedded) with WinAnsi encoding, wrapped to the page width, and poppler reads the same
// words back; an image is 8-bit gray, Flate-compressed, drawn to fill its page, as a
// scanner without OCR writes it. write_flate_bomb_pdf writes a hostile file for the
// reader's limits.
//
// Thread safety: pure functions of their arguments.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fairlane/document/image.hpp"

namespace fairlane {

struct PdfWriterOptions {
  std::string title;    // the document information's /Title; none when empty
  bool locked = false;  // an /Encrypt dictionary (Standard, V 1, R 2) that no password opens
};

// One page of write_pages_pdf: text, an image, both (a scan with its OCR text on top) or
// neither (a blank page).
struct PdfPage {
  std::string text;  // as write_pdf's strings; empty: no text on the page at all
  // Drawn to fill the page, whatever its own size in pixels (0 black, 255 white); none
  // when `data` is null. Not owned: it must outlive the call.
  GrayPixels image;
  // The page's size in points (1/72 inch); 0 for Letter's 612 or 792. A page with text is
  // never smaller than Letter (its text wraps at Letter's width and starts at the top
  // left), and grows taller when its lines need it.
  int width_pt = 0;
  int height_pt = 0;
};

// A PDF with one page per element of `pages`, in order. Each string is UTF-8 text: '\n'
// starts a new line, lines longer than the page is wide wrap at spaces (or anywhere when
// a word alone is too long), and a page grows taller when its lines need it, so no text
// falls off a page. Characters outside WinAnsi (Latin-1 plus the typographic quotes,
// dashes, bullet and euro) are written as '?'. No pages gives a PDF whose page tree is
// empty. `locked` gives a PDF that readers report as encrypted and cannot open without a
// password, which does not exist: its content is not really encrypted.
[[nodiscard]] std::string write_pdf(const std::vector<std::string>& pages,
                                    const PdfWriterOptions& options = {});

// The same, for pages that may hold an image: each image becomes an image XObject
// (/DeviceGray, 8 bits, /FlateDecode) that the page's content stream scales to the page
// (`q W 0 0 H 0 0 cm /Im1 Do Q`), with the text, if any, drawn over it. Pages of text
// alone come out byte for byte as write_pdf writes them. An image with a side of 0 or
// below, or a stride shorter than its width, is a bug in the caller: it is not drawn.
[[nodiscard]] std::string write_pages_pdf(const std::vector<PdfPage>& pages,
                                          const PdfWriterOptions& options = {});

// A decompression bomb, for the reader's limits: a PDF of one page that holds nothing but a
// black image declared `side_px` pixels square, 8-bit gray, whose stream is Flate-compressed
// twice (/Filter [/FlateDecode /FlateDecode]), so that a file of some kilobytes inflates to
// side_px squared bytes (at 30,000: 900 MB) and rendering the page decodes all of them. The
// page has no text, so a reader sees a scan to render; it is `width_pt` x `height_pt`
// (0: Letter's), and a huge page makes the rendering itself huge too.
struct FlateBomb {
  std::int64_t side_px = 30000;  // at least 1
  int width_pt = 0;
  int height_pt = 0;
};
[[nodiscard]] std::string write_flate_bomb_pdf(const FlateBomb& bomb,
                                               const PdfWriterOptions& options = {});

}  // namespace fairlane
