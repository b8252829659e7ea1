// Clock: where fairlane's core gets the time. Everything that refills, waits or
// estimates asks an injected Clock, so tests and the simulator drive time by hand
// (FakeClock) and production reads the monotonic steady clock (SteadyClock).
//
// Thread safety: SteadyClock may be shared by any threads; see FakeClock for its own.
#pragma once

#include <chrono>

namespace fairlane {

class Clock {
 public:
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::steady_clock::time_point;

  virtual ~Clock() = default;

  // The current time. Never goes backwards.
  [[nodiscard]] virtual time_point now() const = 0;
};

// The process's monotonic clock (std::chrono::steady_clock).
class SteadyClock final : public Clock {
 public:
  [[nodiscard]] time_point now() const override;
};

}  // namespace fairlane
