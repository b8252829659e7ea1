// What an image costs in input tokens, by the providers' published rules, so that the door,
// both buckets and the fair scheduler count an image page before any usage comes back
// (settle corrects with the usage as for text).
//
//   openai (high detail): fit within 2048 x 2048, then scale so the shortest side is 768
//     (never up), then 170 tokens per 512-px tile, plus 85.
//   anthropic: fit the long edge within 1568 px (never up), then width x height / 750.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>

#include "fairlane/provider/provider.hpp"

namespace fairlane {

[[nodiscard]] std::int64_t openai_image_tokens(std::int64_t width, std::int64_t height);
[[nodiscard]] std::int64_t anthropic_image_tokens(std::int64_t width, std::int64_t height);

// The rule of `dialect`.
[[nodiscard]] std::int64_t image_tokens(Dialect dialect, std::int64_t width, std::int64_t height);

}  // namespace fairlane
