// ReaderAnswer: the PDF reader child's answer (read_pdf_child's protocol), read as it
// arrives from the pipe and turned into pages as each one is whole.
//
// The answer is "ok N\n" and N pages, each a header line ("text LENGTH", "image MEDIA_TYPE
// WIDTH HEIGHT LENGTH" or "blank") and its bytes, a refusal line ("refused ..." or
// "too_large ...") standing in for a page where the child found a limit or damage there;
// or a refusal line alone. Each line is checked against the limits as soon as it is whole
// (the page count, a text's bytes, an image's, all pages'), before its bytes come, so the
// child can be killed at once; an image must be the PNG or JPEG, of the size, its line says;
// nothing may follow the last page.
//
// What it holds: the pages handed over, and of the answer only what is not yet a page (at
// most one page and a read's worth of bytes). Until 2026-12-07 the whole answer was kept
// and every page copied out of it at the end: up to three times the limits (256 MB of
// images by default) held for one upload at the peak.
//
// Thread safety: none; one reading owns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fairlane/core/status.hpp"
#include "fairlane/document/document.hpp"

namespace fairlane::reader {

class ReaderAnswer {
 public:
  explicit ReaderAnswer(const PdfReading& limits) : limits_(limits) {}

  // Takes bytes from the child; a Status once the answer breaks a limit or cannot be an
  // answer (read no more of it then).
  [[nodiscard]] std::optional<Status> add(std::string_view data);

  // Once the child has ended: its pages, or the refusal it answered, or an internal error
  // when the answer was cut short.
  [[nodiscard]] Result<std::vector<DocumentPage>> finish();

  // The bytes of the answer held that are not yet a page.
  [[nodiscard]] std::size_t buffered() const { return bytes_.size(); }
  // The pages the answer announced ("ok N"; 0 before its first line), and how many of them
  // have come whole so far.
  [[nodiscard]] std::int64_t announced() const { return pages_; }
  [[nodiscard]] std::int64_t received() const {
    return static_cast<std::int64_t>(pages_done_.size());
  }

 private:
  static constexpr std::size_t kMaxLine = 4096;

  // A page's line, read; its bytes are awaited.
  struct Pending {
    PageKind kind = PageKind::blank;
    std::string media_type;
    std::int64_t width = 0;
    std::int64_t height = 0;
    std::size_t length = 0;
  };

  // The answer's first line, or the next page's.
  [[nodiscard]] std::optional<Status> read_line(std::string_view line);
  [[nodiscard]] std::optional<Status> over_limit(const Pending& page);
  // The pending page's bytes, the first length of bytes_, as a page.
  [[nodiscard]] std::optional<Status> take_page();
  [[nodiscard]] bool complete() const {
    return refusal_.has_value() || (head_read_ && pages_read_ == pages_ && !pending_);
  }

  PdfReading limits_;
  std::string bytes_;  // what came after the last line or page read
  bool head_read_ = false;
  std::optional<Status> refusal_;  // the child's refusal, which ends the answer
  std::int64_t pages_ = 0;         // announced by "ok N"
  std::int64_t pages_read_ = 0;    // whose line has been read
  std::int64_t total_bytes_ = 0;   // announced by the pages' lines so far, texts and images
  std::optional<Pending> pending_;
  std::vector<DocumentPage> pages_done_;
};

}  // namespace fairlane::reader
