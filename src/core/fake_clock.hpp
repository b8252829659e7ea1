// FakeClock: a Clock that only moves when told to. Unit tests and the simulator
// advance it by hand, so nothing in them sleeps and every number is reproducible.
//
// Thread safety: none; one thread owns it (like the core it drives).
#pragma once

#include "fairlane/core/clock.hpp"

namespace fairlane {

class FakeClock final : public Clock {
 public:
  // Starts at `start` (the steady clock's epoch by default).
  explicit FakeClock(time_point start = time_point{}) : now_(start) {}

  [[nodiscard]] time_point now() const override { return now_; }

  // Moves the time forward by `step`. A negative step is ignored: a Clock never goes back.
  void advance(duration step);

  // Moves the time forward to `t`; a `t` in the past is ignored.
  void advance_to(time_point t);

 private:
  time_point now_;
};

}  // namespace fairlane
