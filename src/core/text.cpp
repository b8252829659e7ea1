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

namespace {

// The character at the start of `text`: its bytes, or, where it is not a valid one (a NUL,
// or an invalid sequence), the length of the maximal subpart that one U+FFFD replaces.
struct Piece {
  std::size_t size;
  bool valid;
};

Piece first_piece(std::string_view text) {
  const auto lead = static_cast<unsigned char>(text[0]);
  if (lead == 0) return {1, false};
  if (lead < 0x80) return {1, true};
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
  while (length > 0 && valid < length && valid < text.size()) {
    const auto next = static_cast<unsigned char>(text[valid]);
    const bool second = valid == 1;
    if (next < (second ? low : 0x80) || next > (second ? high : 0xBF)) break;
    ++valid;
  }
  return {valid, length > 0 && valid == length};
}

}  // namespace

std::string storable_text(std::string_view text) {
  static constexpr std::string_view kReplacement = "\xef\xbf\xbd";  // U+FFFD
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    const Piece piece = first_piece(text);
    if (piece.valid) {
      out.append(text.substr(0, piece.size));
    } else {
      out += kReplacement;  // one for the maximal subpart
    }
    text.remove_prefix(piece.size);
  }
  return out;
}

std::optional<char32_t> first_character(std::string_view text) {
  if (text.empty()) return std::nullopt;
  const Piece piece = first_piece(text);
  if (!piece.valid) return std::nullopt;
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  // The lead byte's bits below its length marker, then six from each byte after it.
  char32_t c = piece.size == 1 ? byte(0) : byte(0) & (0x7Fu >> piece.size);
  for (std::size_t i = 1; i < piece.size; ++i) c = (c << 6) | (byte(i) & 0x3Fu);
  return c;
}

bool is_storable_text(std::string_view text) {
  while (!text.empty()) {
    const Piece piece = first_piece(text);
    if (!piece.valid) return false;
    text.remove_prefix(piece.size);
  }
  return true;
}

}  // namespace fairlane
