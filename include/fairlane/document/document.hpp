// The document layer of PDF uploads: the file part of a multipart/form-data body, and a
// PDF's text split into pages. Both refuse bad input with StatusCode::invalid_argument and
// a sentence naming the problem and the remedy, which the API returns verbatim
// (400 invalid_document); a PDF over a limit on pages or text is payload_too_large (413).
//
// Thread safety: pure functions of their arguments; any number of threads may call them at
// once on different inputs (split_pdf runs on a worker pool; it reads one PDF at a time in a
// process, src/document/pdf.cpp says why).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fairlane/core/result.hpp"

namespace fairlane {

// The text of each page of a PDF, in page order, as UTF-8 in reading order: lines end in
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

// The first part named `field` of a multipart/form-data body. `content_type_header` is the
// request's Content-Type (multipart/form-data; boundary=...). The filename loses any
// directories a client put in it. The body is taken by value so
// that the part's bytes are cut out of it in place: the result's data is the body's own
// buffer (move the request body in to avoid any copy of it).
// Fails when the Content-Type is not multipart/form-data or has no boundary, when the body
// is malformed or has no closing boundary (a cut-short upload), or when no part is named
// `field`.
[[nodiscard]] Result<MultipartFile> multipart_file(std::string_view content_type_header,
                                                   std::string body,
                                                   std::string_view field = "file");

}  // namespace fairlane
