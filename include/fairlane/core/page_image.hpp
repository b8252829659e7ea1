// What a page is sent as: its text, its image (a scan, or any page under --page-input image),
// or nothing at all (a blank page, which makes no call). The document layer makes these, the
// store keeps them, the provider sends them.
//
// Thread safety: value types.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fairlane {

enum class PageKind { text, image, blank };

// "text", "image", "blank": the names the API and the database use.
[[nodiscard]] std::string_view to_string(PageKind kind);
[[nodiscard]] std::optional<PageKind> page_kind_from(std::string_view name);

// An encoded page image, as it is stored and sent.
struct PageImage {
  std::string media_type;  // "image/png" or "image/jpeg"
  std::int64_t width = 0;  // pixels
  std::int64_t height = 0;
  std::string bytes;  // the encoded file
};

}  // namespace fairlane
