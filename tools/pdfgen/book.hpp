// The text of a generated book: readable English-like prose, the same for the same seed on
// every platform (its own generator, not <random>'s distributions, which differ between
// standard libraries). Every page starts with the line "Page K of N", so a test can check
// that pages come back complete and in order.
//
// Thread safety: a pure function of its arguments.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fairlane::pdfgen {

// `pages` pages of about 250 words each: "Page K of N", a blank line, then paragraphs
// separated by blank lines.
[[nodiscard]] std::vector<std::string> generate_book(int pages, std::uint64_t seed);

}  // namespace fairlane::pdfgen
