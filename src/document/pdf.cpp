// split_pdf: poppler-cpp opens the PDF from memory and extracts each page's text.
//
// Threads: poppler-cpp allows different documents on different threads at once, so there
// is no lock here. Its global state is
//  - GlobalParams, which every document holds a counted reference to (poppler's
//    GlobalParamsIniter, under poppler's own mutex) and which guards its caches with its
//    own mutex;
//  - the core's error callback, written only when the first document of the process is
//    created (the count goes from 0 to 1, under that mutex), when no other document exists
//    to read it;
//  - poppler-cpp's debug function, a plain pointer with no lock: it is written once, through
//    std::call_once, before any document is loaded, and never again. Nothing else in
//    fairlane may call poppler::set_debug_error_function.
// A document is used by one thread only (the one that loaded it) and destroyed before the
// call returns.
#include <poppler-document.h>
#include <poppler-global.h>
#include <poppler-page.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "fairlane/document.hpp"

namespace fairlane {
namespace {

// poppler prints every parse error to stderr by default; a bad upload is not worth a line
// of the server's log, and the caller gets a Status instead.
void ignore_poppler_message(const std::string& /*message*/, void* /*closure*/) {}

void silence_poppler() {
  static std::once_flag once;
  std::call_once(once, [] { poppler::set_debug_error_function(ignore_poppler_message, nullptr); });
}

Status damaged() {
  return {StatusCode::invalid_argument,
          "the PDF could not be read: it is damaged or truncated; upload the file again"};
}

// A PDF ends with %%EOF in its last 1024 bytes (Acrobat requires it). poppler does not:
// it rebuilds a missing cross-reference table, and a cut-short upload whose first pages
// survived would open with its last pages missing or blank. Truncation is how uploads are
// damaged most often, so it is refused here.
bool has_end_marker(std::string_view bytes) {
  constexpr std::size_t kTail = 1024;
  const std::string_view tail = bytes.substr(bytes.size() - std::min(bytes.size(), kTail));
  return tail.find("%%EOF") != std::string_view::npos;
}

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\f' || c == '\v';
}

}  // namespace

Result<std::vector<std::string>> split_pdf(std::string_view bytes, std::int64_t max_pages) {
  silence_poppler();
  if (bytes.size() > static_cast<std::size_t>(INT_MAX)) {
    return Status(StatusCode::invalid_argument,
                  "the PDF is larger than 2 GiB, more than fairlane reads: split it into "
                  "smaller files and upload them one by one");
  }
  if (!has_end_marker(bytes)) return damaged();

  // load_from_raw_data reads `bytes` in place (no copy); `bytes` outlives `document`.
  const std::unique_ptr<poppler::document> document(
      poppler::document::load_from_raw_data(bytes.data(), static_cast<int>(bytes.size())));
  if (!document) return damaged();
  // Before anything else: poppler 22.12 crashes on pages() of a locked document.
  if (document->is_locked()) {
    return Status(StatusCode::invalid_argument,
                  "the PDF is encrypted: remove the password and upload it again");
  }
  const int page_count = document->pages();
  if (page_count <= 0) return Status(StatusCode::invalid_argument, "the PDF has no pages");
  if (max_pages > 0 && page_count > max_pages) {
    return Status(StatusCode::invalid_argument,
                  fmt::format("the PDF has {} pages; at most {} are taken in one upload: split it",
                              page_count, max_pages));
  }

  std::vector<std::string> pages;
  pages.reserve(static_cast<std::size_t>(page_count));
  bool any_text = false;
  for (int i = 0; i < page_count; ++i) {
    const std::unique_ptr<poppler::page> page(document->create_page(i));
    if (!page) return damaged();
    // Reading order (pdftotext's default): columns come out one after the other and words
    // are separated by single spaces. The physical layout pads with spaces to mimic the
    // page and runs the lines of side-by-side columns together; the raw order follows the
    // content stream, which many producers write in no reading order at all.
    const poppler::byte_array utf8 =
        page->text(poppler::rectf(), poppler::page::non_raw_non_physical_layout).to_utf8();
    std::string text(utf8.begin(), utf8.end());
    // poppler ends a page with blank lines (a paragraph break); one '\n' is enough.
    while (!text.empty() && is_space(text.back())) text.pop_back();
    if (!text.empty()) {
      text += '\n';
      any_text = true;
    }
    pages.push_back(std::move(text));
  }
  if (!any_text) {
    return Status(StatusCode::invalid_argument,
                  "the PDF has no text layer (scanned images?): run it through OCR first");
  }
  return pages;
}

}  // namespace fairlane
