#include "book.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstddef>
#include <string_view>

#include "splitmix64.hpp"

namespace fairlane::pdfgen {
namespace {

constexpr std::array<std::string_view, 120> kWords = {
    "the",     "river",      "lantern", "morning",  "quiet",   "harbor",  "letter",   "window",
    "garden",  "stone",      "winter",  "market",   "old",     "bright",  "careful",  "distant",
    "small",   "heavy",      "narrow",  "green",    "silver",  "walked",  "carried",  "opened",
    "watched", "remembered", "found",   "followed", "built",   "painted", "answered", "waited",
    "counted", "kept",       "closed",  "a",        "an",      "and",     "but",      "of",
    "to",      "in",         "on",      "under",    "across",  "beside",  "through",  "before",
    "after",   "with",       "without", "her",      "his",     "their",   "our",      "every",
    "some",    "many",       "few",     "each",     "road",    "bridge",  "village",  "mountain",
    "forest",  "kitchen",    "table",   "chair",    "book",    "page",    "story",    "question",
    "journey", "evening",    "light",   "shadow",   "voice",   "song",    "clock",    "door",
    "field",   "boat",       "island",  "station",  "train",   "ticket",  "map",      "compass",
    "signal",  "tower",      "bell",    "slowly",   "quickly", "again",   "together", "alone",
    "almost",  "never",      "always",  "often",    "perhaps", "still",   "soon",     "then",
    "there",   "was",        "were",    "had",      "would",   "could",   "might",    "said",
    "thought", "knew",       "saw",     "heard",    "felt",    "left",    "came",     "year",
};

std::string sentence(SplitMix64& random) {
  const int words = random.between(6, 16);
  std::string out;
  for (int i = 0; i < words; ++i) {
    std::string word(
        kWords[static_cast<std::size_t>(random.between(0, static_cast<int>(kWords.size()) - 1))]);
    if (i == 0) {
      word[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(word[0])));
    } else {
      out += ' ';
    }
    out += word;
    if (i > 1 && i + 2 < words && random.between(0, 9) == 0) out += ',';
  }
  out += random.between(0, 7) == 0 ? '?' : '.';
  return out;
}

}  // namespace

std::vector<std::string> generate_book(int pages, std::uint64_t seed) {
  SplitMix64 random(seed);
  std::vector<std::string> book;
  for (int page = 1; page <= pages; ++page) {
    std::string text = fmt::format("Page {} of {}\n", page, pages);
    int words = 0;
    while (words < 250) {
      text += '\n';
      const int sentences = random.between(3, 6);
      for (int i = 0; i < sentences; ++i) {
        const std::string next = sentence(random);
        if (i > 0) text += ' ';
        text += next;
        words += 1 + static_cast<int>(std::count(next.begin(), next.end(), ' '));
      }
      text += '\n';
    }
    book.push_back(std::move(text));
  }
  return book;
}

}  // namespace fairlane::pdfgen
