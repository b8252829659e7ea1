// The image token rules on the providers' own worked examples (OpenAI's and Anthropic's
// vision guides), and the rounding this project chose where they say nothing: up.
#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <utility>

#include "fairlane/provider/image_tokens.hpp"

using fairlane::anthropic_image_tokens;
using fairlane::Dialect;
using fairlane::image_tokens;
using fairlane::openai_image_tokens;

TEST_CASE("OpenAI, high detail: the vision guide's examples") {
  // 1024 x 1024: within 2048, shortest side to 768: 768 x 768, 2 x 2 tiles.
  CHECK(openai_image_tokens(1024, 1024) == 170 * 4 + 85);
  CHECK(openai_image_tokens(1024, 1024) == 765);
  // 2048 x 4096: fit to 1024 x 2048, then 768 x 1536: 2 x 3 tiles.
  CHECK(openai_image_tokens(2048, 4096) == 1105);
  CHECK(openai_image_tokens(4096, 2048) == 1105);
  // 4096 x 8192 comes to the same 768 x 1536.
  CHECK(openai_image_tokens(4096, 8192) == 1105);
}

TEST_CASE("OpenAI: a small image is never scaled up") {
  // Shortest side 512, already below 768: one tile.
  CHECK(openai_image_tokens(512, 512) == 255);
  CHECK(openai_image_tokens(1, 1) == 255);
  CHECK(openai_image_tokens(513, 512) == 170 * 2 + 85);
  // 700 x 700: below 768, kept; 2 x 2 tiles.
  CHECK(openai_image_tokens(700, 700) == 765);
  // 768 x 768 exactly: kept.
  CHECK(openai_image_tokens(768, 768) == 765);
}

TEST_CASE("OpenAI: tiles are ceil(w / 512) x ceil(h / 512) of the scaled image") {
  // A portrait page of 1700 x 2200 (letter at 200 dpi): fits 2048 as 1583 x 2048 (1582.5
  // rounded up), then 768 x 994 (993.6 rounded up): 2 x 2 tiles.
  CHECK(openai_image_tokens(1700, 2200) == 765);
  // A long strip, 600 x 3000: fits 2048 as 410 x 2048 (409.6 rounded up); shortest side
  // below 768: 1 x 4 tiles.
  CHECK(openai_image_tokens(600, 3000) == 170 * 4 + 85);
  // 1536 x 1025: no fit needed; shortest side to 768 makes the long side 1150.8, rounded up
  // to 1151: 3 x 2 tiles.
  CHECK(openai_image_tokens(1536, 1025) == 170 * 6 + 85);
}

TEST_CASE("OpenAI: a scaled side is rounded up, which may add a tile but never take one away") {
  // 770 x 1027: shortest side to 768, long side 1027 * 768 / 770 = 1024.3, rounded up to
  // 1025: 2 x 3 tiles. Rounded down or to the nearest, 1024 would be 2 x 2 (765).
  CHECK(openai_image_tokens(770, 1027) == 170 * 6 + 85);
  // 1025 x 1537: long side 1151.6, up to 1152: 2 x 3 tiles either way.
  CHECK(openai_image_tokens(1025, 1537) == 170 * 6 + 85);
  // 2049 x 1: fit to 2048 x 1 (0.9995 rounded up to 1, never 0).
  CHECK(openai_image_tokens(2049, 1) == 170 * 4 + 85);
}

TEST_CASE("Anthropic: the vision guide's examples, w x h / 750 rounded up") {
  // 40,000 / 750 = 53.3
  CHECK(anthropic_image_tokens(200, 200) == 54);
  // 1,000,000 / 750 = 1,333.3
  CHECK(anthropic_image_tokens(1000, 1000) == 1334);
  // 1,192,464 / 750 = 1,589.95
  CHECK(anthropic_image_tokens(1092, 1092) == 1590);
  // Exact: 750 x 1 is one token.
  CHECK(anthropic_image_tokens(750, 1) == 1);
  CHECK(anthropic_image_tokens(1, 1) == 1);
}

TEST_CASE("Anthropic: a long edge past 1568 px is first scaled down to 1568") {
  // 3136 x 3136 -> 1568 x 1568: 2,458,624 / 750 = 3,278.2, rounded up.
  CHECK(anthropic_image_tokens(3136, 3136) == 3279);
  CHECK(anthropic_image_tokens(1568, 1568) == 3279);
  // 1568 x 100 is kept: 156,800 / 750 = 209.07.
  CHECK(anthropic_image_tokens(1568, 100) == 210);
  // 3136 x 1000 -> 1568 x 500: 784,000 / 750 = 1,045.3.
  CHECK(anthropic_image_tokens(3136, 1000) == 1046);
  CHECK(anthropic_image_tokens(1000, 3136) == 1046);
  // 1700 x 2200 -> 1212 x 1568 (1211.6 rounded up): 1,900,416 / 750 = 2,533.9.
  CHECK(anthropic_image_tokens(1700, 2200) == 2534);
}

TEST_CASE("No image costs nothing, and absurd sides do not overflow") {
  const std::array<std::pair<std::int64_t, std::int64_t>, 4> empty{
      {{0, 100}, {100, 0}, {-5, 10}, {0, 0}}};
  for (const auto& size : empty) {
    CAPTURE(size.first);
    CAPTURE(size.second);
    CHECK(openai_image_tokens(size.first, size.second) == 0);
    CHECK(anthropic_image_tokens(size.first, size.second) == 0);
  }
  constexpr std::int64_t kHuge = std::int64_t{1} << 62;
  // Clamped to 2^31 - 1 a side: a square, so the same as any large square.
  CHECK(openai_image_tokens(kHuge, kHuge) == 765);
  CHECK(anthropic_image_tokens(kHuge, kHuge) == 3279);
  // A 1-px strip of any length: one row of tiles, or one short edge of 1.
  CHECK(openai_image_tokens(kHuge, 1) == 170 * 4 + 85);
  CHECK(anthropic_image_tokens(kHuge, 1) == 3);  // 1568 x 1: 2.09, rounded up
}

TEST_CASE("image_tokens follows the dialect's rule") {
  CHECK(image_tokens(Dialect::openai, 2048, 4096) == 1105);
  CHECK(image_tokens(Dialect::anthropic, 2048, 4096) == anthropic_image_tokens(2048, 4096));
  CHECK(image_tokens(Dialect::anthropic, 1000, 1000) == 1334);
}
