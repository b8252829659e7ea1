#include "fairlane/core/page_image.hpp"

namespace fairlane {

std::string_view to_string(PageKind kind) {
  switch (kind) {
    case PageKind::text:
      return "text";
    case PageKind::image:
      return "image";
    case PageKind::blank:
      return "blank";
  }
  return "text";
}

std::optional<PageKind> page_kind_from(std::string_view name) {
  for (const PageKind kind : {PageKind::text, PageKind::image, PageKind::blank}) {
    if (to_string(kind) == name) return kind;
  }
  return std::nullopt;
}

}  // namespace fairlane
