// The document layer of PDF uploads: the file part of a multipart/form-data body, and a
// PDF's pages, each as its text, as an image (rendered by poppler, encoded PNG or JPEG) or as
// blank. Both refuse bad input with StatusCode::invalid_argument and
// a sentence naming the problem and the remedy, which the API returns verbatim
// (400 invalid_document); a PDF over a limit on pages or text is payload_too_large (413).
//
// Thread safety: pure functions of their arguments; any number of threads may call them at
// once on different inputs (split_pdf runs on a worker pool; it reads one PDF at a time in a
// process, src/document/pdf.cpp says why).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fairlane/core/page_image.hpp"
#include "fairlane/core/result.hpp"

namespace fairlane {

// How a PDF's pages go to the provider (--page-input):
//   automatic  a page with a text layer as its text, one without as its image (a scan);
//   text       every page as its text; a page without text is blank (nothing to send);
//   image      every page as its image (layouts and tables read better that way).
// Under all three, a page with neither text nor ink is blank: it makes no call.
enum class PageInputMode { automatic, text, image };
// "auto", "text", "image".
[[nodiscard]] std::string_view to_string(PageInputMode input);
[[nodiscard]] std::optional<PageInputMode> page_input_from(std::string_view name);

// How pages are rendered: at `dpi`, lowered for a page whose long edge would pass
// `max_long_edge` pixels (the largest image the providers take without scaling it down
// themselves; Anthropic's 1568). Grayscale, 8 bits a pixel: scans are read for their text.
struct RenderOptions {
  double dpi = 150.0;
  std::int64_t max_long_edge = 1568;
};

// What a PDF may hold, and how it is read. 0: no limit.
struct PdfReading {
  PageInputMode input = PageInputMode::automatic;
  RenderOptions render = {};
  std::int64_t max_pages = 0;        // checked before any page is read
  std::int64_t max_page_bytes = 0;   // of one page's text
  std::int64_t max_image_bytes = 0;  // of one page's encoded image
  std::int64_t max_total_bytes = 0;  // of all the pages' texts and images together
};

// One page as it goes to the provider: kind text with its text (UTF-8 in reading order, lines
// ending in '\n', the last one too), kind image with its image (and no text), or blank.
struct DocumentPage {
  PageKind kind = PageKind::text;
  std::string text = {};
  std::optional<PageImage> image = {};
};

// A PDF's pages in page order, read as `reading` says, handed to `page` one by one as they
// are read (so that a reader can pass each on before the next is rendered); `count` is told
// the number of pages first. A Status from either ends the reading with it.
// Fails as split_pdf does (not a PDF, damaged, encrypted, no pages, a limit passed: the
// limits are payload_too_large, and a page's image past max_image_bytes or all the pages' texts
// and images together past max_total_bytes too, checked page by page), and when a page cannot
// be rendered.
// It does not refuse a PDF whose pages are all blank: check_pages does, once all are read.
// Reads one PDF at a time in a process (src/document/pdf.cpp says why).
[[nodiscard]] Status read_pdf(std::string_view bytes, const PdfReading& reading,
                              const std::function<Status(std::int64_t)>& count,
                              const std::function<Status(DocumentPage)>& page);

// All the pages of read_pdf, checked with check_pages.
[[nodiscard]] Result<std::vector<DocumentPage>> read_pdf(std::string_view bytes,
                                                         const PdfReading& reading);

// Refuses a PDF with nothing to send: every page blank. Under PageInputMode::text, the sentence
// that asks for OCR (a scan has no text layer); otherwise, that every page is blank.
[[nodiscard]] Status check_pages(const std::vector<DocumentPage>& pages, PageInputMode input);

// The text of each page of a PDF (read_pdf under PageInputMode::text), in page order, as UTF-8 in
// reading order: lines end in
// '\n', and a page's text ends with exactly one. A page without text is kept as an empty
// string, so element i is always page i + 1.
// Fails when the bytes are not a PDF (the message names what they seem to be and quotes
// their start, escaped to printable ASCII), when the PDF is damaged or truncated, when it is
// encrypted, when it has no pages, when it has more than `max_pages` (0: any number; checked
// before any text is read) or a page has more than `max_page_bytes` bytes of text (0: any;
// checked page by page, the reading stops there), both payload_too_large, or when no page has
// any text (a scan).
// `bytes` is only read, and only during the call.
[[nodiscard]] Result<std::vector<std::string>> split_pdf(std::string_view bytes,
                                                         std::int64_t max_pages = 0,
                                                         std::int64_t max_page_bytes = 0);

// One part of a multipart/form-data body (RFC 7578).
struct MultipartFile {
  std::string filename;      // from Content-Disposition; empty when the client sent none
  std::string content_type;  // the part's Content-Type; empty when the client sent none
  std::string data;          // the part's bytes, exactly as sent
};

// The part named `field` of a multipart/form-data body. `content_type_header` is the
// request's Content-Type (multipart/form-data; boundary=...). A part named `field` with no
// filename and no bytes (a form's file input left empty) is skipped, unless it is the only
// one. The filename loses any directories a client put in it. The body is taken by value so
// that the part's bytes are cut out of it in place: the result's data is the body's own
// buffer (move the request body in to avoid any copy of it).
// Fails when the Content-Type is not multipart/form-data or has no boundary, when the body
// is malformed or has no closing boundary (a cut-short upload), when no part is named
// `field`, or when two parts named `field` hold a file (RFC 7578 4.3: `curl -F file=@a.pdf
// -F file=@b.pdf`, `<input type=file multiple>`): one upload is one PDF.
[[nodiscard]] Result<MultipartFile> multipart_file(std::string_view content_type_header,
                                                   std::string body,
                                                   std::string_view field = "file");

// What multipart_file() refuses of the Content-Type alone (not multipart/form-data, or no
// boundary), with the same sentence; the boundary otherwise. For the headers of an upload,
// before its body is read.
[[nodiscard]] Result<std::string> multipart_boundary(std::string_view content_type_header,
                                                     std::string_view field = "file");

}  // namespace fairlane
