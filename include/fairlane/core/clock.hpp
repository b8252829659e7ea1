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

// `s` seconds as a Clock::duration, to the nearest nanosecond: 1.001 s is 1,001,000,000 ns,
// though the double nearest 1.001 is a little less (truncating would give one ns fewer).
[[nodiscard]] inline Clock::duration from_seconds(double s) {
  return std::chrono::round<Clock::duration>(std::chrono::duration<double>(s));
}

// The process's monotonic clock (std::chrono::steady_clock).
class SteadyClock final : public Clock {
 public:
  [[nodiscard]] time_point now() const override;
};

}  // namespace fairlane
