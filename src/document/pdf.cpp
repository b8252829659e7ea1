// read_pdf: poppler-cpp opens the PDF from memory, extracts each page's text and, where a
// page goes as an image, renders it (render.cpp).
//
// Threads: one document at a time in a process. poppler-cpp's own global state would allow
// several (GlobalParams is counted and locked), but poppler 22.12's colour management shares
// lcms2 state between documents without a lock: ThreadSanitizer caught two threads freeing and
// allocating the same lcms2 block (cmsMLUfree) while extracting text from different PDFs. So
// every call holds one process-wide mutex for as long as poppler runs. The service does not
// lose its parallelism by it: it reads each upload in its own child process
// (`fairlane read-pdf`, pdf_reader.cpp), one document per process; only an embedder that
// reads in its own process is serialised.
// poppler-cpp's debug function, a plain pointer with no lock, is written once, through
// std::call_once, before any document is loaded, and never again. Nothing else in fairlane
// may call poppler::set_debug_error_function.
#include <poppler-document.h>
#include <poppler-global.h>
#include <poppler-page.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string_view>

#include <fmt/format.h>

#include "document/render.hpp"
#include "fairlane/core/text.hpp"
#include "fairlane/document/document.hpp"
#include "refusals.hpp"

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

// The PDF header, %PDF-, may follow junk a mailer or a web server put before it: the PDF
// specification allows it within the first 1024 bytes. poppler searches exactly there (for
// a header that starts before byte 1019, its search's bound) and reads the file from it.
constexpr std::size_t kHeaderSearch = 1024;
constexpr std::string_view kHeader = "%PDF-";

bool has_header(std::string_view bytes) {
  return bytes.substr(0, kHeaderSearch - 1).find(kHeader) != std::string_view::npos;
}

bool starts_with(std::string_view bytes, std::string_view prefix) {
  return bytes.substr(0, prefix.size()) == prefix;
}

bool starts_with_nocase(std::string_view bytes, std::string_view prefix) {
  if (bytes.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    char c = bytes[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != prefix[i]) return false;
  }
  return true;
}

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\f' || c == '\v';
}

// What a file that is not a PDF seems to be, from its first bytes ("" when unknown): the
// few things people upload by mistake.
std::string_view kind_of(std::string_view bytes) {
  if (starts_with(bytes, "\x89PNG\r\n\x1a\n")) return "a PNG image";
  if (starts_with(bytes, "\xff\xd8\xff")) return "a JPEG image";
  if (starts_with(bytes, "GIF87a") || starts_with(bytes, "GIF89a")) return "a GIF image";
  if (starts_with(bytes, std::string_view("II*\0", 4)) ||
      starts_with(bytes, std::string_view("MM\0*", 4))) {
    return "a TIFF image";
  }
  if (starts_with(bytes, "PK\x03\x04")) return "a ZIP archive (a Word or other Office document?)";
  std::string_view text = bytes;
  if (starts_with(text, "\xef\xbb\xbf")) text.remove_prefix(3);  // a UTF-8 byte order mark
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  if (starts_with_nocase(text, "<!doctype html") || starts_with_nocase(text, "<html")) {
    return "an HTML page";
  }
  if (starts_with(text, "<?xml")) return "XML";
  if (starts_with(text, "{") || starts_with(text, "[")) return "JSON";
  const std::string_view start = bytes.substr(0, 64);
  const bool printable = std::all_of(start.begin(), start.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u >= 0x80 || (u >= 0x20 && u != 0x7f) || is_space(c);
  });
  return printable ? "text" : "";
}

// The first bytes of a file, for a message: printable ASCII as it is, a quote or backslash
// escaped, and every other byte as \n, \r, \t or \xHH, so that a hostile file cannot put
// control characters (or anything but printable ASCII) into the message.
std::string quoted_start(std::string_view bytes) {
  constexpr std::size_t kShown = 20;
  std::string out = "\"";
  for (const char c : bytes.substr(0, kShown)) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      out += fmt::format("\\x{:02x}", u);
    }
  }
  out += '"';
  return out;
}

Status not_a_pdf(std::string_view bytes) {
  if (bytes.empty()) {
    return {StatusCode::invalid_argument,
            "this is not a PDF, so it could not be read: the file is empty"};
  }
  const std::string_view kind = kind_of(bytes);
  return {StatusCode::invalid_argument,
          fmt::format("this is not a PDF{}{}, so it could not be read: it starts with {} (a PDF "
                      "starts with {}); upload the PDF itself",
                      kind.empty() ? "" : " but ", kind, quoted_start(bytes), kHeader)};
}

// Whether a PDF was cut short. poppler does not tell: it rebuilds a missing or broken
// cross-reference table by scanning the file, so a cut-short upload whose first pages
// survived opens with its last pages missing or blank. Truncation is how uploads are damaged
// most often, so it is tested here: a whole PDF ends its last revision with %%EOF, and after
// the last %%EOF of the file there is at most padding or junk, never objects or a
// cross-reference section, which would be an incremental update (or the rest of a
// linearized file, whose first %%EOF comes early) cut before its own %%EOF. The %%EOF is
// searched for in the whole file, not only in its last 1024 bytes as Acrobat does: viewers
// and poppler read files padded with kilobytes after it.
// Where the number before text[at] starts, when whitespace separates them ("12 " before
// "obj"); npos when there is none.
std::size_t number_before(std::string_view text, std::size_t at) {
  std::size_t i = at;
  if (i == 0 || !is_space(text[i - 1])) return std::string_view::npos;
  while (i > 0 && is_space(text[i - 1])) --i;
  const std::size_t digits_end = i;
  while (i > 0 && text[i - 1] >= '0' && text[i - 1] <= '9') --i;
  return i < digits_end ? i : std::string_view::npos;
}

bool looks_cut_short(std::string_view bytes) {
  constexpr std::string_view kEnd = "%%EOF";
  const std::size_t end = bytes.rfind(kEnd);
  if (end == std::string_view::npos) return true;
  const std::string_view after = bytes.substr(end + kEnd.size());
  for (const std::string_view keyword : {"endobj", "stream", "xref", "trailer"}) {
    if (after.find(keyword) != std::string_view::npos) return true;
  }
  // "N G obj", an object's start.
  for (std::size_t at = after.find("obj"); at != std::string_view::npos;
       at = after.find("obj", at + 1)) {
    const std::size_t generation = number_before(after, at);
    if (generation != std::string_view::npos &&
        number_before(after, generation) != std::string_view::npos) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::string_view to_string(PageInputMode input) {
  switch (input) {
    case PageInputMode::automatic:
      return "auto";
    case PageInputMode::text:
      return "text";
    case PageInputMode::image:
      return "image";
  }
  return "auto";
}

std::optional<PageInputMode> page_input_from(std::string_view name) {
  for (const PageInputMode input :
       {PageInputMode::automatic, PageInputMode::text, PageInputMode::image}) {
    if (to_string(input) == name) return input;
  }
  return std::nullopt;
}

Status read_pdf(std::string_view bytes, const PdfReading& reading,
                const std::function<Status(std::int64_t)>& count,
                const std::function<Status(DocumentPage)>& page_read) {
  silence_poppler();
  if (bytes.size() > static_cast<std::size_t>(INT_MAX)) {
    return Status(StatusCode::invalid_argument,
                  "the PDF is larger than 2 GiB, more than fairlane reads: split it into "
                  "smaller files and upload them one by one");
  }
  if (!has_header(bytes)) return not_a_pdf(bytes);
  if (looks_cut_short(bytes)) return damaged();

  static std::mutex poppler_mutex;
  const std::lock_guard lock(poppler_mutex);
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
  if (page_count <= 0) {
    // A viewer may still show pages: one that walks the tree does not trust its /Count.
    return Status(StatusCode::invalid_argument,
                  "the PDF has no pages that can be counted (its page tree's /Count is 0, "
                  "missing or out of range): if a viewer shows pages in it, its page tree is "
                  "damaged; export it again (print to PDF) and upload that");
  }
  if (reading.max_pages > 0 && page_count > reading.max_pages) {
    return refusals::too_many_pages(page_count, reading.max_pages);
  }
  if (Status told = count(page_count); !told.ok()) return told;

  // The pages' texts and images so far: a small PDF whose pages share one compressed content
  // stream can hold thousands of pages each within max_page_bytes.
  std::int64_t total_bytes = 0;
  for (int i = 0; i < page_count; ++i) {
    const std::unique_ptr<poppler::page> page(document->create_page(i));
    if (!page) {
      return Status(StatusCode::invalid_argument,
                    fmt::format("page {} of the {} the PDF's page tree counts is missing: its "
                                "page tree is damaged; export it again (print to PDF) and "
                                "upload that",
                                i + 1, page_count));
    }
    DocumentPage read;
    // Reading order (pdftotext's default): columns come out one after the other and words
    // are separated by single spaces. The physical layout pads with spaces to mimic the
    // page and runs the lines of side-by-side columns together; the raw order follows the
    // content stream, which many producers write in no reading order at all.
    const poppler::byte_array utf8 =
        page->text(poppler::rectf(), poppler::page::non_raw_non_physical_layout).to_utf8();
    // A glyph mapped to U+0000 (or bytes poppler passed on broken) would be refused by
    // PostgreSQL's text: as every store keeps it (storable_text).
    read.text = storable_text(std::string_view(utf8.data(), utf8.size()));
    // poppler ends a page with blank lines (a paragraph break); one '\n' is enough.
    while (!read.text.empty() && is_space(read.text.back())) read.text.pop_back();
    const bool has_text = !read.text.empty();
    if (has_text) read.text += '\n';
    const bool as_image = reading.input == PageInputMode::image ||
                          (reading.input == PageInputMode::automatic && !has_text);
    if (!as_image) {
      // A page past the limit ends the reading: the pages after it would be refused with it.
      const auto text_bytes = static_cast<std::int64_t>(read.text.size());
      if (reading.max_page_bytes > 0 && text_bytes > reading.max_page_bytes) {
        return refusals::page_too_long(i + 1, text_bytes, reading.max_page_bytes);
      }
      total_bytes += text_bytes;
      if (!has_text) read.kind = PageKind::blank;
    } else {
      // A page with text is drawn whatever its ink: it cannot be blank.
      auto image = render::render_page(*page, i + 1, reading.render, has_text);
      if (!image.ok()) return image.status();
      read.text.clear();
      if (!image->has_value()) {
        read.kind = PageKind::blank;
      } else {
        const auto size = static_cast<std::int64_t>((*image)->bytes.size());
        if (reading.max_image_bytes > 0 && size > reading.max_image_bytes) {
          return refusals::image_too_large(i + 1, size, reading.max_image_bytes);
        }
        total_bytes += size;
        read.kind = PageKind::image;
        read.image = std::move(**image);
      }
    }
    if (reading.max_total_bytes > 0 && total_bytes > reading.max_total_bytes) {
      return refusals::pages_too_large(i + 1, reading.max_total_bytes);
    }
    if (Status passed = page_read(std::move(read)); !passed.ok()) return passed;
  }
  return {};
}

Status check_pages(const std::vector<DocumentPage>& pages, PageInputMode input) {
  const bool all_blank = std::all_of(pages.begin(), pages.end(), [](const DocumentPage& page) {
    return page.kind == PageKind::blank;
  });
  if (!all_blank) return {};
  if (input == PageInputMode::text) {
    return {StatusCode::invalid_argument,
            "the PDF has no text layer (scanned images?): run it through OCR first"};
  }
  return {StatusCode::invalid_argument,
          "every page of the PDF is blank (no text and no ink): there is nothing to read; "
          "check that this is the file you meant to upload"};
}

Result<std::vector<DocumentPage>> read_pdf(std::string_view bytes, const PdfReading& reading) {
  std::vector<DocumentPage> pages;
  const Status read = read_pdf(
      bytes, reading,
      [&](std::int64_t count) {
        pages.reserve(static_cast<std::size_t>(count));
        return Status();
      },
      [&](DocumentPage page) {
        pages.push_back(std::move(page));
        return Status();
      });
  if (!read.ok()) return read;
  if (Status checked = check_pages(pages, reading.input); !checked.ok()) return checked;
  return pages;
}

Result<std::vector<std::string>> split_pdf(std::string_view bytes, std::int64_t max_pages,
                                           std::int64_t max_page_bytes) {
  auto pages = read_pdf(bytes, PdfReading{.input = PageInputMode::text,
                                          .max_pages = max_pages,
                                          .max_page_bytes = max_page_bytes});
  if (!pages.ok()) return pages.status();
  std::vector<std::string> texts;
  texts.reserve(pages->size());
  for (DocumentPage& page : pages.value()) texts.push_back(std::move(page.text));
  return texts;
}

}  // namespace fairlane
