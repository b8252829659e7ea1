// Small text helpers shared by every parser of the protocol's bytes (headers, multipart,
// the API's requests): ASCII only, locale-free.
//
// Thread safety: pure functions.
#pragma once

#include <string_view>

namespace fairlane {

// Case-insensitive ASCII comparison (header names, schemes, media types).
[[nodiscard]] bool iequals(std::string_view a, std::string_view b);

// `s` without leading and trailing white space (space, tab, CR, LF, VT, FF).
[[nodiscard]] std::string_view trim(std::string_view s);

}  // namespace fairlane
