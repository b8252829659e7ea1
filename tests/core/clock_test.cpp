#include <doctest/doctest.h>

#include <chrono>

#include "core/fake_clock.hpp"
#include "fairlane/core/clock.hpp"
#include "fairlane/core/wall_clock.hpp"

using namespace std::chrono_literals;
using fairlane::Clock;
using fairlane::FakeClock;
using fairlane::FakeWallClock;
using fairlane::SteadyClock;
using fairlane::WallTime;

TEST_CASE("FakeClock starts where it is told and moves only when advanced") {
  const Clock::time_point start = Clock::time_point{} + 5s;
  FakeClock clock(start);
  CHECK(clock.now() == start);
  CHECK(clock.now() == start);
  clock.advance(1500ms);
  CHECK(clock.now() == start + 1500ms);
  clock.advance_to(start + 10s);
  CHECK(clock.now() == start + 10s);
}

TEST_CASE("FakeClock never goes backwards") {
  FakeClock clock(Clock::time_point{} + 10s);
  clock.advance(-3s);
  CHECK(clock.now() == Clock::time_point{} + 10s);
  clock.advance_to(Clock::time_point{} + 2s);
  CHECK(clock.now() == Clock::time_point{} + 10s);
}

TEST_CASE("SteadyClock is monotonic") {
  const SteadyClock clock;
  const auto first = clock.now();
  const auto second = clock.now();
  CHECK(second >= first);
}

TEST_CASE("FakeWallClock shows its start date plus what the FakeClock moved since") {
  FakeClock clock(Clock::time_point{} + 5s);
  clock.advance(2s);  // before the wall clock was made: not counted
  const WallTime start = WallTime{} + std::chrono::hours(480'000);
  const FakeWallClock wall(clock, start);
  CHECK(wall.now() == start);
  clock.advance(1500ms);
  CHECK(wall.now() == start + 1500ms);
}
