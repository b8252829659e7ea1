// A writer of minimal PDFs with known text, for tests, samples and fairlane-pdfgen: PDF 1.4,
// one page per string, the text in Helvetica (a standard Type 1 font, not embedded) with
// WinAnsi encoding, wrapped to the page width. poppler reads the same words back.
//
// Thread safety: pure functions of their arguments.
#pragma once

#include <string>
#include <vector>

namespace fairlane {

struct PdfWriterOptions {
  std::string title;    // the document information's /Title; none when empty
  bool locked = false;  // an /Encrypt dictionary (Standard, V 1, R 2) that no password opens
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

}  // namespace fairlane
