// parse_json_upload (api_json.hpp): a JSON upload read as a stream of parse events, with no
// document built. Only the fields it takes are kept, and of the pages at most `max_pages`:
// past them it only counts. A DOM of the whole body first cost 16 bytes for each value
// (30 million empty pages, a 90 MB body: 480 MB, 1.5 GB at its peak) before its 413.
#include <fmt/format.h>

#include <boost/json/basic_parser_impl.hpp>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "fairlane/core/text.hpp"
#include "service/api_json.hpp"

namespace fairlane::service {
namespace {

namespace json = boost::json;
using boost::system::error_code;

// The events of one upload's body, as json::basic_parser calls them. Depth counts the
// containers open: the root object's own fields are read at depth 1, the pages at depth 2.
// Every callback returns true: the whole body is read (a page past the limit is only
// counted), so that what is refused is decided on the whole, in the order the API promises.
class UploadEvents {
 public:
  static constexpr std::size_t max_object_size = std::numeric_limits<std::size_t>::max();
  static constexpr std::size_t max_array_size = std::numeric_limits<std::size_t>::max();
  static constexpr std::size_t max_key_size = std::numeric_limits<std::size_t>::max();
  static constexpr std::size_t max_string_size = std::numeric_limits<std::size_t>::max();

  explicit UploadEvents(std::size_t keep) : keep_(keep) {}

  // The first page that is not text, by its number from 1, and why.
  enum class BadPage { not_text, nul };
  struct Refused {
    std::size_t page = 0;
    BadPage why = BadPage::not_text;
  };

  bool on_document_begin(error_code& /*ec*/) { return true; }
  bool on_document_end(error_code& /*ec*/) { return true; }

  bool on_object_begin(error_code& /*ec*/) {
    if (depth_ == 0) root_object_ = true;
    value_begins(Kind::object);
    ++depth_;
    return true;
  }
  bool on_object_end(std::size_t /*n*/, error_code& /*ec*/) {
    --depth_;
    return true;
  }
  bool on_array_begin(error_code& /*ec*/) {
    value_begins(Kind::array);
    ++depth_;
    return true;
  }
  bool on_array_end(std::size_t /*n*/, error_code& /*ec*/) {
    --depth_;
    if (depth_ == 1) in_pages_ = false;
    return true;
  }

  bool on_key_part(std::string_view s, std::size_t /*n*/, error_code& /*ec*/) {
    if (depth_ != 1) return true;
    if (key_done_) key_.clear();
    key_done_ = false;
    key_.append(s);
    return true;
  }
  bool on_key(std::string_view s, std::size_t n, error_code& ec) {
    on_key_part(s, n, ec);
    key_done_ = true;
    return true;
  }

  bool on_string_part(std::string_view s, std::size_t /*n*/, error_code& /*ec*/) {
    if (!string_open_) {
      string_open_ = true;
      value_begins(Kind::string);
    }
    if (string_ != nullptr) {
      string_->append(s);
      if (s.find('\0') != std::string_view::npos) nul_ = true;
    }
    return true;
  }
  bool on_string(std::string_view s, std::size_t n, error_code& ec) {
    on_string_part(s, n, ec);
    if (in_page() && nul_ && !refused_) refused_ = Refused{count_, BadPage::nul};
    string_open_ = false;
    string_ = nullptr;
    nul_ = false;
    return true;
  }

  bool on_number_part(std::string_view /*s*/, error_code& /*ec*/) { return true; }
  bool on_int64(std::int64_t i, std::string_view /*s*/, error_code& /*ec*/) {
    value_begins(Kind::other);
    if (depth_ == 1 && key_ == "max_tokens") max_tokens_ = i;
    return true;
  }
  bool on_uint64(std::uint64_t /*u*/, std::string_view /*s*/, error_code& /*ec*/) {
    value_begins(Kind::other);
    return true;
  }
  bool on_double(double /*d*/, std::string_view /*s*/, error_code& /*ec*/) {
    value_begins(Kind::other);
    return true;
  }
  bool on_bool(bool /*b*/, error_code& /*ec*/) {
    value_begins(Kind::other);
    return true;
  }
  bool on_null(error_code& /*ec*/) {
    value_begins(Kind::other);
    return true;
  }
  bool on_comment_part(std::string_view /*s*/, error_code& /*ec*/) { return true; }
  bool on_comment(std::string_view /*s*/, error_code& /*ec*/) { return true; }

  // Once the body has been read whole: whether it is an object with a list of pages, how
  // many, the first refused, and max_tokens (absent; a whole number; or, inside, nullopt
  // for anything else).
  [[nodiscard]] bool has_pages() const { return root_object_ && pages_are_a_list_; }
  [[nodiscard]] std::size_t pages() const { return count_; }
  [[nodiscard]] const std::optional<Refused>& refused() const { return refused_; }
  [[nodiscard]] const std::optional<std::optional<std::int64_t>>& max_tokens() const {
    return max_tokens_;
  }
  // Where a parse stopped, by the pages: the page whose text was being read (its number
  // from 1: the one begun, or the next), or the last page read in the list; nullopt outside
  // the list of pages.
  [[nodiscard]] std::optional<std::size_t> page_being_read() const {
    if (!in_page()) return std::nullopt;
    return string_open_ ? count_ : count_ + 1;
  }
  [[nodiscard]] std::optional<std::size_t> last_page_read() const {
    if (!in_page() || count_ == 0) return std::nullopt;
    return count_;
  }
  JsonUpload take() { return std::move(upload_); }

 private:
  enum class Kind { string, array, object, other };

  [[nodiscard]] bool in_page() const { return in_pages_ && depth_ == 2; }

  // A value begins at the current depth: a field of the root object (the last of a name
  // counts, as in a parsed object), a page, or something deeper that nothing reads.
  void value_begins(Kind kind) {
    if (depth_ == 1 && key_ == "pages") {
      pages_are_a_list_ = in_pages_ = kind == Kind::array;
      count_ = 0;
      upload_.pages.clear();
      refused_.reset();
    } else if (depth_ == 1 && key_ == "max_tokens") {
      max_tokens_.emplace(std::nullopt);  // a whole number sets it (on_int64)
    } else if (depth_ == 1 && key_ == "name") {
      upload_.name.reset();
      if (kind == Kind::string) string_ = &upload_.name.emplace();
    } else if (in_page()) {
      ++count_;
      if (kind != Kind::string) {
        if (!refused_) refused_ = Refused{count_, BadPage::not_text};
      } else if (count_ <= keep_ && !refused_) {
        string_ = &upload_.pages.emplace_back();
      }
    }
  }

  const std::size_t keep_;  // pages kept at most; past them, only counted
  JsonUpload upload_;
  int depth_ = 0;  // containers open
  bool root_object_ = false;
  std::string key_;  // the root object's field being read
  bool key_done_ = true;
  bool pages_are_a_list_ = false;
  bool in_pages_ = false;           // inside the list of pages
  std::size_t count_ = 0;           // pages seen
  std::optional<Refused> refused_;  // the first page that is not text
  bool string_open_ = false;        // a string's parts are being read
  std::string* string_ = nullptr;   // where they go (nullptr: nowhere)
  bool nul_ = false;                // they hold a NUL
  std::optional<std::optional<std::int64_t>> max_tokens_;
};

// Whether the body's bytes just before `at` are a \u escape of a UTF-16 surrogate.
bool after_surrogate_escape(std::string_view body, std::size_t at) {
  constexpr std::size_t kEscape = 6;  // \uD83D
  for (std::size_t back = kEscape; back <= kEscape + 2 && back <= at; ++back) {
    const std::string_view escape = body.substr(at - back, kEscape);
    if (escape.size() == kEscape && escape[0] == '\\' && escape[1] == 'u' &&
        (escape[2] == 'd' || escape[2] == 'D') &&
        std::string_view("89abAB").find(escape[3]) != std::string_view::npos) {
      return true;
    }
  }
  return false;
}

// What a character out of place in JSON may be, for the message.
std::string_view looks_like(char32_t c) {
  switch (c) {
    case 0xFEFF:
      return " (a byte order mark, which JSON does not take: send the body without one)";
    case 0x201C:
    case 0x201D:
    case 0x2018:
    case 0x2019:
      return " (a typographic quote: JSON's strings are in straight quotes, \")";
    case 0x00A0:
      return " (a no-break space: JSON's spaces are plain ones)";
    default:
      return "";
  }
}

// Why a body that is not JSON is not, where (`at`: the parse stopped there), and in which
// page, with the remedy when the cause is a known one.
std::string not_json(std::string_view body, std::size_t at, const error_code& error,
                     const UploadEvents& events) {
  const std::size_t byte = at + 1;  // counted from 1, as an editor counts columns
  if (error == json::error::too_deep) {
    return fmt::format(
        "the body nests its lists and objects deeper than 32 levels (byte {}), more than "
        "fairlane reads: an upload is {{\"pages\": [...]}} with a few fields beside it",
        byte);
  }
  const auto page = events.page_being_read();
  const std::string where = page ? fmt::format("page {}'s text", *page) : "the body";
  const auto last = events.last_page_read();
  const std::string after = last ? fmt::format(", after page {}", *last) : "";
  if (at < body.size() && static_cast<unsigned char>(body[at]) >= 0x80) {
    // UTF-8 a string would have taken: a character JSON takes only inside one.
    if (const auto c = first_character(body.substr(at))) {
      return fmt::format("the body is not valid JSON: an unexpected U+{:04X} at byte {}{}{}",
                         static_cast<std::uint32_t>(*c), byte, after, looks_like(*c));
    }
    return fmt::format("{} is not UTF-8 (byte {} of the body): send the text as UTF-8", where,
                       byte);
  }
  if (error == json::error::illegal_leading_surrogate ||
      error == json::error::illegal_trailing_surrogate || after_surrogate_escape(body, at)) {
    return fmt::format(
        "{} holds half of a UTF-16 surrogate pair (\\ud800 to \\udfff alone, byte {} of the "
        "body): an emoji or other character cut in two; send whole characters",
        where, byte);
  }
  return fmt::format("the body is not valid JSON ({} at byte {}{})", error.message(), byte, after);
}

}  // namespace

std::variant<JsonUpload, ApiAnswer> parse_json_upload(std::string_view body,
                                                      std::int64_t default_max_tokens,
                                                      std::int64_t max_pages) {
  const auto invalid = [](const std::string& message) {
    return ApiAnswer{400, error_json("invalid_document", message), std::nullopt};
  };
  const std::size_t keep =
      max_pages > 0 ? static_cast<std::size_t>(max_pages) : std::numeric_limits<std::size_t>::max();
  json::basic_parser<UploadEvents> parser(json::parse_options{}, keep);
  error_code parse_error;
  const std::size_t read = parser.write_some(false, body.data(), body.size(), parse_error);
  if (!parse_error && read < body.size()) parse_error = json::error::extra_data;
  UploadEvents& events = parser.handler();
  if (parse_error) return invalid(not_json(body, read, parse_error, events));
  if (!events.has_pages()) return invalid("the body needs \"pages\": a list of page texts");
  if (max_pages > 0 && events.pages() > static_cast<std::size_t>(max_pages)) {
    return ApiAnswer{413,
                     error_json("payload_too_large",
                                fmt::format("the upload has {} pages; at most {} are taken at "
                                            "once (--max-pages): split it",
                                            events.pages(), max_pages)),
                     std::nullopt};
  }
  if (const auto& max_tokens = events.max_tokens()) {
    if (!*max_tokens || **max_tokens < 1 || **max_tokens > kMaxTokensCeiling) {
      return bad_max_tokens(default_max_tokens);
    }
  }
  if (const auto& refused = events.refused()) {
    if (refused->why == UploadEvents::BadPage::not_text) {
      return invalid(
          fmt::format("page {} is not text: \"pages\" is a list of the pages' texts, as strings: "
                      "{{\"pages\": [\"page one\", \"page two\"]}}",
                      refused->page));
    }
    return invalid(fmt::format(
        "page {} holds a NUL character (\\u0000), which a page's text may not: remove it",
        refused->page));
  }
  JsonUpload upload = events.take();
  if (const auto& max_tokens = events.max_tokens()) upload.max_tokens = **max_tokens;
  return upload;
}

}  // namespace fairlane::service
