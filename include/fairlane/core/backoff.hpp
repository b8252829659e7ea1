// Exponential backoff: the one doubling every retry in fairlane uses (a page's failed
// attempts, the pauses while the provider is unreachable, the group commit's retries).
//
// Thread safety: a pure function.
#pragma once

#include <cstdint>

#include "fairlane/core/clock.hpp"

namespace fairlane {

// base x 2^n, at most `max` (n below 0 counts as 0). Never overflows, however large n is.
[[nodiscard]] Clock::duration doubled(Clock::duration base, std::int64_t n, Clock::duration max);

}  // namespace fairlane
