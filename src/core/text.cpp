#include "fairlane/core/text.hpp"

#include <algorithm>
#include <cctype>
#include <cstddef>

namespace fairlane {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  const auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

std::string storable_text(std::string_view text) {
  static constexpr std::string_view kReplacement = "\xef\xbf\xbd";  // U+FFFD
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    if (lead == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    if (lead < 0x80) {
      out += static_cast<char>(lead);
      ++i;
      continue;
    }
    // The sequence's length and the range of its second byte (Unicode's table 3-7).
    std::size_t length = 0;
    unsigned char low = 0x80;
    unsigned char high = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) low = 0xA0;   // no overlong form
      if (lead == 0xED) high = 0x9F;  // no surrogate
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) low = 0x90;   // no overlong form
      if (lead == 0xF4) high = 0x8F;  // nothing above U+10FFFF
    }
    std::size_t valid = 1;  // bytes of the sequence that are as they should be
    while (length > 0 && valid < length && i + valid < text.size()) {
      const auto next = static_cast<unsigned char>(text[i + valid]);
      const bool second = valid == 1;
      if (next < (second ? low : 0x80) || next > (second ? high : 0xBF)) break;
      ++valid;
    }
    if (length > 0 && valid == length) {
      out.append(text.substr(i, length));
    } else {
      out += kReplacement;  // one for the maximal subpart
    }
    i += valid;
  }
  return out;
}

}  // namespace fairlane
