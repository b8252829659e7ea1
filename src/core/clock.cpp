#include "fairlane/core/clock.hpp"

#include "core/fake_clock.hpp"

namespace fairlane {

Clock::time_point SteadyClock::now() const {
  return std::chrono::steady_clock::now();
}

void FakeClock::advance(duration step) {
  if (step > duration::zero()) now_ += step;
}

void FakeClock::advance_to(time_point t) {
  if (t > now_) now_ = t;
}

}  // namespace fairlane
