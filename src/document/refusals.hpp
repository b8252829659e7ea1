// The refusals read_pdf (in the reader's child) and read_pdf_in_child (in the parent) both
// make, in the same words, so that a limit reads the same wherever it was found.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "fairlane/core/status.hpp"

namespace fairlane::refusals {

// A PDF refused for what it is (damaged, encrypted, too complex), in the reader's words.
inline Status refused(std::string message) {
  return {StatusCode::invalid_argument, std::move(message)};
}

inline Status too_many_pages(std::int64_t pages, std::int64_t max_pages) {
  return {StatusCode::payload_too_large,
          fmt::format("the PDF has {} pages; at most {} are taken in one upload: split it", pages,
                      max_pages)};
}

// `page` counts from 1.
inline Status page_too_long(std::int64_t page, std::int64_t bytes, std::int64_t max_page_bytes) {
  return {StatusCode::payload_too_large,
          fmt::format("page {} has {} bytes of text; a page may have at most {} (--max-page-kb): "
                      "split the page",
                      page, bytes, max_page_bytes)};
}

// `page` counts from 1.
inline Status image_too_large(std::int64_t page, std::int64_t bytes, std::int64_t max_bytes) {
  return {StatusCode::payload_too_large,
          fmt::format("page {}'s image is {} bytes; a page's image may have at most {}: export "
                      "the PDF again at a lower resolution, or split it",
                      page, bytes, max_bytes)};
}

// The pages up to `page` (from 1), their texts and images together, passed `max_bytes`:
// what one upload may hold, however little the PDF's compressed streams weigh.
inline Status pages_too_large(std::int64_t page, std::int64_t max_bytes) {
  constexpr std::int64_t kMiB = std::int64_t{1024} * 1024;
  const std::string limit = max_bytes % kMiB == 0 ? fmt::format("{} MiB", max_bytes / kMiB)
                                                  : fmt::format("{} bytes", max_bytes);
  return {StatusCode::payload_too_large,
          fmt::format("the PDF's pages come to more than {} of text and images by page {}, more "
                      "than one upload may hold: split the PDF",
                      limit, page)};
}

}  // namespace fairlane::refusals
