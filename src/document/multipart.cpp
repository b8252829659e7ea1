// multipart_file: a one-pass reader of multipart/form-data (RFC 7578 on RFC 2046's
// multipart syntax). It finds the parts by their delimiters ("--" boundary at the start of
// a line), reads each part's headers up to the blank line, and notes where the wanted
// part's bytes start and end. Only then is the body cut down to those bytes, in place:
// the tail is dropped, the head erased (one memmove of the file's bytes to the front of
// the same buffer), and the buffer moved into the result. So a 100 MB upload is never
// copied into a second buffer; returning offsets into the body instead would save the
// memmove but leave every caller holding two objects whose lifetimes must match.
//
// Line ends: the delimiter lines decide. When the first one ends in CRLF, as RFC 2046
// requires, every delimiter is looked for as CRLF "--" boundary, so a bare LF inside the
// file's bytes is data; when it ends in a bare LF (hand-written bodies), LF is the line end.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <optional>
#include <utility>

#include "fairlane/core/text.hpp"
#include "fairlane/document/document.hpp"

namespace fairlane {
namespace {

bool is_blank(char c) {
  return c == ' ' || c == '\t';
}

// A header value such as `form-data; name="file"; filename="book.pdf"`: the part before
// the first ';' and the parameters after it, names in lower case. A quoted value may
// escape '"' and '\' with a backslash; any other backslash is kept, because browsers send
// Windows paths unescaped.
struct HeaderValue {
  std::string_view value;
  std::vector<std::pair<std::string, std::string>> parameters;

  [[nodiscard]] std::optional<std::string_view> parameter(std::string_view name) const {
    for (const auto& [key, parameter_value] : parameters) {
      if (key == name) return parameter_value;
    }
    return std::nullopt;
  }
};

HeaderValue parse_header_value(std::string_view text) {
  HeaderValue result;
  std::size_t pos = std::min(text.find(';'), text.size());
  result.value = trim(text.substr(0, pos));
  while (pos < text.size()) {
    ++pos;  // the ';'
    while (pos < text.size() && is_blank(text[pos])) ++pos;
    const std::size_t name_end = std::min(text.find_first_of("=;", pos), text.size());
    std::string name(trim(text.substr(pos, name_end - pos)));
    std::transform(name.begin(), name.end(), name.begin(), [](char c) {
      return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    });
    pos = name_end;
    std::string value;
    if (pos < text.size() && text[pos] == '=') {
      ++pos;
      while (pos < text.size() && is_blank(text[pos])) ++pos;
      if (pos < text.size() && text[pos] == '"') {
        for (++pos; pos < text.size() && text[pos] != '"'; ++pos) {
          if (text[pos] == '\\' && pos + 1 < text.size() &&
              (text[pos + 1] == '"' || text[pos + 1] == '\\')) {
            ++pos;
          }
          value += text[pos];
        }
        pos = std::min(text.find(';', pos), text.size());
      } else {
        const std::size_t value_end = std::min(text.find(';', pos), text.size());
        value = trim(text.substr(pos, value_end - pos));
        pos = value_end;
      }
    }
    if (!name.empty()) result.parameters.emplace_back(std::move(name), std::move(value));
  }
  return result;
}

// The file name without the directories some clients still send (RFC 7578, 4.2).
std::string base_name(std::string_view filename) {
  const std::size_t slash = filename.find_last_of("/\\");
  return std::string(slash == std::string_view::npos ? filename : filename.substr(slash + 1));
}

// Whether the delimiter that ends at `pos` is a real one: followed by "--" (the last) or by
// optional blanks and the line end, not by more characters of a longer word.
bool delimiter_ends_at(std::string_view body, std::size_t pos) {
  if (body.substr(pos).starts_with("--")) return true;
  while (pos < body.size() && is_blank(body[pos])) ++pos;
  return pos == body.size() || body[pos] == '\n' || body.substr(pos).starts_with("\r\n");
}

// The next delimiter "<line end>--boundary" at or after `from`: where its line end starts.
std::size_t find_delimiter(std::string_view body, std::string_view delimiter, std::size_t from) {
  for (std::size_t at = body.find(delimiter, from); at != std::string_view::npos;
       at = body.find(delimiter, at + 1)) {
    if (delimiter_ends_at(body, at + delimiter.size())) return at;
  }
  return std::string_view::npos;
}

Status malformed(std::string_view what, std::string_view field) {
  return {StatusCode::invalid_argument,
          fmt::format("the multipart body is malformed ({}): send the PDF again as -F {}=@book.pdf",
                      what, field)};
}

}  // namespace

Result<std::string> multipart_boundary(std::string_view content_type_header,
                                       std::string_view field) {
  const HeaderValue content_type = parse_header_value(content_type_header);
  if (!iequals(content_type.value, "multipart/form-data")) {
    return Status(StatusCode::invalid_argument,
                  fmt::format("the upload is not multipart/form-data (its Content-Type is \"{}\"): "
                              "send the PDF as -F {}=@book.pdf",
                              content_type_header, field));
  }
  const auto boundary = content_type.parameter("boundary");
  if (!boundary || boundary->empty()) {
    return Status(StatusCode::invalid_argument,
                  fmt::format("the upload's Content-Type has no boundary parameter: send the PDF "
                              "as -F {}=@book.pdf, which sets it",
                              field));
  }
  return std::string(*boundary);
}

Result<MultipartFile> multipart_file(std::string_view content_type_header, std::string body,
                                     std::string_view field) {
  const auto boundary = multipart_boundary(content_type_header, field);
  if (!boundary.ok()) return boundary.status();
  const std::string dash_boundary = "--" + *boundary;
  const std::string_view view(body);

  // The first delimiter: at the very start, or at the start of a line after a preamble.
  std::size_t pos = 0;
  if (!(view.starts_with(dash_boundary) && delimiter_ends_at(view, dash_boundary.size()))) {
    pos = find_delimiter(view, "\n" + dash_boundary, 0);
    if (pos == std::string_view::npos) {
      return malformed(fmt::format("its boundary \"{}\" is not in it", *boundary), field);
    }
    ++pos;
  }
  std::string line_end;  // "\r\n" or "\n": what the first delimiter line ends with
  std::optional<MultipartFile> found;
  bool found_empty_input = false;  // found is an empty file input, which a file replaces
  std::size_t data_begin = 0;
  std::size_t data_end = 0;
  for (;;) {
    pos += dash_boundary.size();
    if (view.substr(pos).starts_with("--")) break;  // the closing delimiter; the rest is epilogue
    while (pos < view.size() && is_blank(view[pos])) ++pos;
    const std::string_view this_end = view.substr(pos).starts_with("\r\n") ? "\r\n" : "\n";
    if (line_end.empty()) line_end = this_end;
    if (pos == view.size()) {
      return Status(StatusCode::invalid_argument,
                    "the multipart body has no closing boundary: the upload was cut short; "
                    "send it again");
    }
    pos += this_end.size();

    // The part's headers, one a line, up to the blank line.
    std::string name;
    bool form_data = false;
    MultipartFile part;
    for (;;) {
      const std::size_t newline = view.find('\n', pos);
      if (newline == std::string_view::npos) {
        return malformed("a part's headers do not end with a blank line", field);
      }
      std::string_view header = view.substr(pos, newline - pos);
      if (header.ends_with('\r')) header.remove_suffix(1);
      pos = newline + 1;
      if (header.empty()) break;
      const std::size_t colon = header.find(':');
      if (colon == std::string_view::npos) continue;  // not a header; ignored like unknown ones
      const std::string_view header_name = trim(header.substr(0, colon));
      const std::string_view header_value = header.substr(colon + 1);
      if (iequals(header_name, "Content-Disposition")) {
        const HeaderValue disposition = parse_header_value(header_value);
        form_data = iequals(disposition.value, "form-data");
        name = disposition.parameter("name").value_or("");
        part.filename = base_name(disposition.parameter("filename").value_or(""));
      } else if (iequals(header_name, "Content-Type")) {
        part.content_type = trim(header_value);
      }
    }

    // The part's bytes run up to the line end before the next delimiter.
    const std::size_t next = find_delimiter(view, line_end + dash_boundary, pos);
    if (next == std::string_view::npos) {
      return Status(StatusCode::invalid_argument,
                    "the multipart body has no closing boundary: the upload was cut short; "
                    "send it again");
    }
    if (form_data && name == field) {
      // A form's file input left empty sends a part with no filename and no bytes: skipped,
      // unless no other part holds a file (then the upload is refused as an empty file).
      const bool empty_input = part.filename.empty() && next == pos;
      if (!found || (found_empty_input && !empty_input)) {
        found = std::move(part);
        found_empty_input = empty_input;
        data_begin = pos;
        data_end = next;
      } else if (!empty_input) {
        return Status(
            StatusCode::invalid_argument,
            fmt::format("the multipart upload has more than one part named \"{}\": a "
                        "job is one PDF; send each PDF as its own upload (-F {}=@book.pdf)",
                        field, field));
      }
    }
    pos = next + line_end.size();
  }

  if (!found) {
    return Status(StatusCode::invalid_argument,
                  fmt::format("the multipart upload has no part named \"{}\": send the PDF as "
                              "-F {}=@book.pdf",
                              field, field));
  }
  body.erase(data_end);
  body.erase(0, data_begin);
  found->data = std::move(body);
  return std::move(*found);
}

}  // namespace fairlane
