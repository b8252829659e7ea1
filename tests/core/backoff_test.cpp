#include <doctest/doctest.h>

#include <chrono>
#include <limits>

#include "fairlane/core/backoff.hpp"

using namespace std::chrono_literals;
using fairlane::doubled;

TEST_CASE("Backoff doubles from its base to its ceiling, and no further however often") {
  CHECK(doubled(1s, 0, 60s) == 1s);
  CHECK(doubled(1s, 1, 60s) == 2s);
  CHECK(doubled(1s, 5, 60s) == 32s);
  CHECK(doubled(1s, 6, 60s) == 60s);
  CHECK(doubled(100ms, 7, 10s) == 10s);                                      // 12.8 s capped
  CHECK(doubled(1s, std::numeric_limits<std::int64_t>::max(), 60s) == 60s);  // no overflow
  CHECK(doubled(1s, -3, 60s) == 1s);
  CHECK(doubled(90s, 0, 60s) == 60s);  // a base above the ceiling is the ceiling
}
