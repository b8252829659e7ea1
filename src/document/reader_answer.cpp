#include "reader_answer.hpp"

#include <algorithm>
#include <charconv>
#include <utility>

#include "fairlane/document/image.hpp"
#include "refusals.hpp"

namespace fairlane::reader {
namespace {

Status unreadable_answer() {
  return Status(StatusCode::internal, "the PDF reader's answer could not be read");
}

// A refusal line ("refused MESSAGE" or "too_large MESSAGE", the latter for a limit on pages
// or bytes) as the Status it stands for; nullopt for any other line.
std::optional<Status> refusal_of(std::string_view line) {
  if (line.rfind("refused ", 0) == 0) return refusals::refused(std::string(line.substr(8)));
  if (line.rfind("too_large ", 0) == 0) {
    return Status(StatusCode::payload_too_large, std::string(line.substr(10)));
  }
  return std::nullopt;
}

// The number `text` is, if it is one (digits only).
std::optional<std::int64_t> number(std::string_view text) {
  std::int64_t value = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  const auto [end, error] = std::from_chars(first, last, value);
  if (first == last || error != std::errc() || end != last || value < 0) return std::nullopt;
  return value;
}

// `line` cut at its spaces.
std::vector<std::string_view> words(std::string_view line) {
  std::vector<std::string_view> out;
  while (!line.empty()) {
    const std::size_t space = line.find(' ');
    out.push_back(line.substr(0, space));
    if (space == std::string_view::npos) break;
    line.remove_prefix(space + 1);
  }
  return out;
}

}  // namespace

std::optional<Status> ReaderAnswer::add(std::string_view data) {
  bytes_.append(data);
  for (;;) {
    if (pending_) {
      if (bytes_.size() < pending_->length) return std::nullopt;  // its bytes are coming
      if (auto bad = take_page()) return bad;
      continue;
    }
    // Bytes past the end of the last page (or of the refusal) belong to no answer.
    if (complete()) return bytes_.empty() ? std::nullopt : std::optional(unreadable_answer());
    const std::size_t end = bytes_.find('\n');
    if (end == std::string::npos) {
      if (bytes_.size() > kMaxLine) return unreadable_answer();
      return std::nullopt;
    }
    if (end > kMaxLine) return unreadable_answer();
    if (auto bad = read_line(std::string_view(bytes_).substr(0, end))) return bad;
    bytes_.erase(0, end + 1);
  }
}

std::optional<Status> ReaderAnswer::read_line(std::string_view line) {
  if (auto refusal = refusal_of(line)) {
    refusal_ = std::move(*refusal);
    return std::nullopt;
  }
  if (!head_read_) {
    head_read_ = true;
    if (line.rfind("ok ", 0) != 0) return unreadable_answer();
    const auto count = number(line.substr(3));
    if (!count) return unreadable_answer();
    if (limits_.max_pages > 0 && *count > limits_.max_pages) {
      return refusals::too_many_pages(*count, limits_.max_pages);
    }
    pages_ = *count;
    pages_done_.reserve(static_cast<std::size_t>(pages_));
    return std::nullopt;
  }
  const std::vector<std::string_view> w = words(line);
  Pending page;
  if (w.size() == 1 && w[0] == "blank") {
  } else if (w.size() == 2 && w[0] == "text") {
    const auto length = number(w[1]);
    if (!length) return unreadable_answer();
    page = Pending{PageKind::text, {}, 0, 0, static_cast<std::size_t>(*length)};
  } else if (w.size() == 5 && w[0] == "image" && (w[1] == "image/png" || w[1] == "image/jpeg")) {
    const auto width = number(w[2]);
    const auto height = number(w[3]);
    const auto length = number(w[4]);
    if (!width || !height || !length || *width == 0 || *height == 0) return unreadable_answer();
    page = Pending{PageKind::image, std::string(w[1]), *width, *height,
                   static_cast<std::size_t>(*length)};
  } else {
    return unreadable_answer();
  }
  ++pages_read_;
  if (auto over = over_limit(page)) return over;
  // Within the limits just checked: the page's bytes then fill the buffer without growing
  // it to twice their size, and become the page as they are. (Never more than 64 MiB ahead
  // of the bytes, should a reading without limits be told of a larger page.)
  constexpr std::size_t kMostAhead = std::size_t{64} * 1024 * 1024;
  bytes_.reserve(std::min(page.length, kMostAhead));
  pending_ = std::move(page);
  return std::nullopt;
}

std::optional<Status> ReaderAnswer::over_limit(const Pending& page) {
  const auto length = static_cast<std::int64_t>(page.length);
  if (page.kind == PageKind::text && limits_.max_page_bytes > 0 &&
      length > limits_.max_page_bytes) {
    return refusals::page_too_long(pages_read_, length, limits_.max_page_bytes);
  }
  if (page.kind == PageKind::image && limits_.max_image_bytes > 0 &&
      length > limits_.max_image_bytes) {
    return refusals::image_too_large(pages_read_, length, limits_.max_image_bytes);
  }
  total_bytes_ += length;
  if (limits_.max_total_bytes > 0 && total_bytes_ > limits_.max_total_bytes) {
    return refusals::pages_too_large(pages_read_, limits_.max_total_bytes);
  }
  return std::nullopt;
}

std::optional<Status> ReaderAnswer::take_page() {
  const Pending page = *std::exchange(pending_, std::nullopt);
  std::string bytes;
  if (bytes_.size() == page.length && bytes_.capacity() <= 2 * page.length + kMaxLine) {
    // The usual case for a large page: no copy. (Not a small page's, left with a larger
    // one's buffer: that page would hold the buffer as long as it lives.)
    bytes = std::exchange(bytes_, {});
  } else {
    bytes = bytes_.substr(0, page.length);
    bytes_.erase(0, page.length);
  }
  DocumentPage done{page.kind, {}, {}};
  if (page.kind == PageKind::text) {
    done.text = std::move(bytes);
    if (done.text.empty()) done.kind = PageKind::blank;
  } else if (page.kind == PageKind::image) {
    const auto announced = read_image_header(bytes);
    if (!announced || announced->media_type != page.media_type || announced->width != page.width ||
        announced->height != page.height) {
      return unreadable_answer();
    }
    done.image = PageImage{page.media_type, page.width, page.height, std::move(bytes)};
  }
  pages_done_.push_back(std::move(done));
  return std::nullopt;
}

Result<std::vector<DocumentPage>> ReaderAnswer::finish() {
  if (refusal_) return std::move(*refusal_);
  if (!head_read_) return Status(StatusCode::internal, "no answer");
  if (!complete()) return Status(StatusCode::internal, "a cut answer");
  return std::move(pages_done_);
}

}  // namespace fairlane::reader
