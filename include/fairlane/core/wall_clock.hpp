// WallClock: where fairlane's core gets the date, for what is persisted and shown (a
// backoff's not_before, the dispatch times of calls left out by a previous process).
// Waiting and budgets use the steady Clock; only a time that outlives the process, or is
// compared with one that did, is a wall time. Injected like the Clock: production reads
// the system clock (SystemWallClock), tests and the simulator a FakeWallClock that follows
// their FakeClock (src/core/fake_clock.hpp).
//
// Thread safety: SystemWallClock may be shared by any threads; see FakeWallClock for its own.
#pragma once

#include "fairlane/core/ids.hpp"

namespace fairlane {

class WallClock {
 public:
  virtual ~WallClock() = default;

  // The current date and time. May jump (the system clock is set), unlike a Clock.
  [[nodiscard]] virtual WallTime now() const = 0;
};

// The system's clock (std::chrono::system_clock).
class SystemWallClock final : public WallClock {
 public:
  [[nodiscard]] WallTime now() const override;
};

}  // namespace fairlane
