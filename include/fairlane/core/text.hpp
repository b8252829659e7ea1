// Small text helpers shared by every parser of the protocol's bytes (headers, multipart,
// the API's requests): locale-free; only storable_text reads beyond ASCII.
//
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace fairlane {

// Case-insensitive ASCII comparison (header names, schemes, media types).
[[nodiscard]] bool iequals(std::string_view a, std::string_view b);

// `s` without leading and trailing white space (space, tab, CR, LF, VT, FF).
[[nodiscard]] std::string_view trim(std::string_view s);

// `text` as every store keeps it: valid UTF-8 holding no NUL. Each NUL becomes U+FFFD (the
// replacement character), and so does each maximal part of an invalid sequence (a byte that
// starts none, a sequence cut short, an overlong form, a surrogate, a code point above
// U+10FFFF), as Unicode's "U+FFFD substitution of maximal subparts" and the WHATWG decoder
// do. PostgreSQL's text takes neither a NUL nor an invalid sequence; SQLite's would, and
// the two stores must give the same results. Valid text without NUL comes back unchanged.
[[nodiscard]] std::string storable_text(std::string_view text);

// Whether `text` is storable as it is: storable_text(text) == text, without the copy.
[[nodiscard]] bool is_storable_text(std::string_view text);

// The character `text` begins with, when it begins with a valid UTF-8 sequence other than
// NUL (by the same rules as storable_text); std::nullopt otherwise, or for empty text.
[[nodiscard]] std::optional<char32_t> first_character(std::string_view text);

}  // namespace fairlane
