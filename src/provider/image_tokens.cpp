// The providers' image token rules (fairlane/provider/image_tokens.hpp), in exact integer
// arithmetic.
//
// Neither provider says how a scaled side is rounded. Here every scaled side is rounded up,
// and so is Anthropic's w x h / 750: these numbers are reservations, which settle corrects
// with the usage, and a reservation that comes out short lets a minute's calls overrun the
// provider's limit where one that comes out long only waits a little. A division that is
// exact (each of the providers' worked examples) is not moved by the rounding.
//
// A side below 1 costs nothing (there is no image); a side past 2^31 - 1 (what a PNG header
// can hold) is taken as 2^31 - 1, which keeps every product below 2^63.
//
// Thread safety: pure functions.
#include "fairlane/provider/image_tokens.hpp"

#include <algorithm>

namespace fairlane {
namespace {

constexpr std::int64_t kMaxSide = 0x7FFF'FFFF;

// ceil(a * b / c) for a, b >= 0 and c > 0, each at most 2^31 - 1.
std::int64_t scale_up(std::int64_t a, std::int64_t b, std::int64_t c) {
  return (a * b + c - 1) / c;
}

struct Size {
  std::int64_t width;
  std::int64_t height;
};

// `size` scaled down, keeping its aspect ratio, so that its long edge is `long_edge`; as it
// is when that is long enough already.
Size fit_long_edge(Size size, std::int64_t long_edge) {
  if (size.width >= size.height) {
    if (size.width <= long_edge) return size;
    return {long_edge, scale_up(size.height, long_edge, size.width)};
  }
  if (size.height <= long_edge) return size;
  return {scale_up(size.width, long_edge, size.height), long_edge};
}

// `size` scaled down, keeping its aspect ratio, so that its short edge is `short_edge`; as it
// is when that is short enough already (never scaled up).
Size fit_short_edge(Size size, std::int64_t short_edge) {
  if (size.width <= size.height) {
    if (size.width <= short_edge) return size;
    return {short_edge, scale_up(size.height, short_edge, size.width)};
  }
  if (size.height <= short_edge) return size;
  return {scale_up(size.width, short_edge, size.height), short_edge};
}

// {0, 0} for a side below 1; a side past kMaxSide is taken as kMaxSide.
Size checked(std::int64_t width, std::int64_t height) {
  if (width < 1 || height < 1) return {0, 0};
  return {std::min(width, kMaxSide), std::min(height, kMaxSide)};
}

}  // namespace

std::int64_t openai_image_tokens(std::int64_t width, std::int64_t height) {
  Size size = checked(width, height);
  if (size.width == 0) return 0;
  // Fitting within 2048 x 2048 is fitting the long edge within 2048.
  size = fit_short_edge(fit_long_edge(size, 2048), 768);
  constexpr std::int64_t kTile = 512;
  const std::int64_t tiles =
      ((size.width + kTile - 1) / kTile) * ((size.height + kTile - 1) / kTile);
  return 170 * tiles + 85;
}

std::int64_t anthropic_image_tokens(std::int64_t width, std::int64_t height) {
  Size size = checked(width, height);
  if (size.width == 0) return 0;
  size = fit_long_edge(size, 1568);
  return scale_up(size.width, size.height, 750);
}

std::int64_t image_tokens(Dialect dialect, std::int64_t width, std::int64_t height) {
  return dialect == Dialect::openai ? openai_image_tokens(width, height)
                                    : anthropic_image_tokens(width, height);
}

}  // namespace fairlane
