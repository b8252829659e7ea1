// FakeClock: a Clock that only moves when told to. Unit tests and the simulator
// advance it by hand, so nothing in them sleeps and every number is reproducible.
// FakeWallClock: the wall clock that goes with it, `start` plus however far the FakeClock
// has moved since the FakeWallClock was made.
//
// Thread safety: none; one thread owns them (like the core they drive).
#pragma once

#include "fairlane/core/clock.hpp"
#include "fairlane/core/wall_clock.hpp"

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

class FakeWallClock final : public WallClock {
 public:
  // `clock` must outlive the wall clock. Reads `start` now, and later `start` plus what
  // `clock` advanced since this construction.
  explicit FakeWallClock(const FakeClock& clock, WallTime start = WallTime{})
      : clock_(clock), start_(start), from_(clock.now()) {}

  [[nodiscard]] WallTime now() const override;

 private:
  // Constant after construction.
  const FakeClock& clock_;
  const WallTime start_;
  const Clock::time_point from_;
};

}  // namespace fairlane
