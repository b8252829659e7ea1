// Base64 (RFC 4648, the standard alphabet, with padding): page images travel in it, in data
// URLs and the providers' image parts.
//
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace fairlane {

[[nodiscard]] std::string base64_encode(std::string_view bytes);

// The bytes `text` encodes; nullopt unless it is canonical base64 with padding (a length
// that is a multiple of 4, only the alphabet, '=' only at the end, no stray bits).
[[nodiscard]] std::optional<std::string> base64_decode(std::string_view text);

}  // namespace fairlane
