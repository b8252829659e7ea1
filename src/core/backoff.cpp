#include "fairlane/core/backoff.hpp"

#include <algorithm>

namespace fairlane {

Clock::duration doubled(Clock::duration base, std::int64_t n, Clock::duration max) {
  Clock::duration delay = base;
  for (std::int64_t i = 0; i < n && delay < max; ++i) delay *= 2;
  return std::min(delay, max);
}

}  // namespace fairlane
