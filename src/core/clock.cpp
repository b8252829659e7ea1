#include "fairlane/core/clock.hpp"

#include "core/fake_clock.hpp"
#include "fairlane/core/wall_clock.hpp"

namespace fairlane {

Clock::time_point SteadyClock::now() const {
  return std::chrono::steady_clock::now();
}

WallTime SystemWallClock::now() const {
  return std::chrono::system_clock::now();
}

void FakeClock::advance(duration step) {
  if (step > duration::zero()) now_ += step;
}

void FakeClock::advance_to(time_point t) {
  if (t > now_) now_ = t;
}

WallTime FakeWallClock::now() const {
  return start_ + std::chrono::duration_cast<WallTime::duration>(clock_.now() - from_);
}

}  // namespace fairlane
