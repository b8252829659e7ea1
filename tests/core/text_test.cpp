#include "fairlane/core/text.hpp"

#include <doctest/doctest.h>

#include <string>

using fairlane::is_storable_text;
using fairlane::storable_text;

namespace {

const std::string kReplacement = "\xef\xbf\xbd";  // U+FFFD

}  // namespace

TEST_CASE("storable_text: valid UTF-8 without NUL comes back unchanged") {
  const std::string text = "page 1: caf\xc3\xa9, \xe2\x82\xac 5, \xf0\x9f\x93\x96 and \xe4\xb8\xad";
  CHECK(storable_text(text) == text);
  CHECK(storable_text("").empty());
  // The edges: U+007F, U+0080, U+07FF, U+0800, U+D7FF, U+E000, U+FFFF, U+10000, U+10FFFF.
  const std::string edges =
      "\x7f\xc2\x80\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf\xf0\x90\x80\x80"
      "\xf4\x8f\xbf\xbf";
  CHECK(storable_text(edges) == edges);
}

TEST_CASE("storable_text: a NUL becomes the replacement character") {
  CHECK(storable_text(std::string("a\0b", 3)) == "a" + kReplacement + "b");
  CHECK(storable_text(std::string(2, '\0')) == kReplacement + kReplacement);
}

TEST_CASE("storable_text: each maximal invalid part becomes one replacement character") {
  // A sequence cut short by the end, and by a byte that cannot continue it.
  CHECK(storable_text("cut \xe2\x82") == "cut " + kReplacement);
  CHECK(storable_text("\xe2\x82z") == kReplacement + "z");
  CHECK(storable_text("\xf0\x9f\x93") == kReplacement);
  // Bytes that start no sequence: a lone continuation, C0, C1, F5 to FF.
  CHECK(storable_text("\x80\xbf") == kReplacement + kReplacement);
  CHECK(storable_text("\xc0\xaf") == kReplacement + kReplacement);  // overlong '/'
  CHECK(storable_text("\xf5\x80\x80\x80") ==
        kReplacement + kReplacement + kReplacement + kReplacement);
  CHECK(storable_text("\xff") == kReplacement);
  // An overlong three-byte form, a surrogate and a code point above U+10FFFF: the lead is
  // one part, each continuation byte after it another.
  CHECK(storable_text("\xe0\x80\x80") == kReplacement + kReplacement + kReplacement);
  CHECK(storable_text("\xed\xa0\x80") == kReplacement + kReplacement + kReplacement);
  CHECK(storable_text("\xf4\x90\x80\x80") ==
        kReplacement + kReplacement + kReplacement + kReplacement);
  // Unicode's example (section 3.9): 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64.
  CHECK(storable_text("\x61\xf1\x80\x80\xe1\x80\xc2\x62\x80\x63\x80\xbf\x64") ==
        "a" + kReplacement + kReplacement + kReplacement + "b" + kReplacement + "c" + kReplacement +
            kReplacement + "d");
}

TEST_CASE("is_storable_text: true exactly where storable_text changes nothing") {
  for (const std::string& text :
       {std::string(), std::string("plain"), std::string("caf\xc3\xa9 \xf0\x9f\x93\x96"),
        std::string("a\0b", 3), std::string("cut \xe2\x82"), std::string("\xc0\xaf"),
        std::string("\xed\xa0\x80"), std::string("\xf4\x90\x80\x80"), std::string("\xff")}) {
    CAPTURE(text);
    CHECK(is_storable_text(text) == (storable_text(text) == text));
  }
  CHECK(is_storable_text("caf\xc3\xa9"));
  CHECK_FALSE(is_storable_text(std::string("a\0b", 3)));
  CHECK_FALSE(is_storable_text("job_\xff"));
}
