#include <doctest/doctest.h>

#include <chrono>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "fairlane/core/clock.hpp"
#include "fairlane/core/in_flight_cap.hpp"

using fairlane::InFlightCap;
using namespace std::chrono_literals;

namespace {
const fairlane::Clock::time_point kNow = fairlane::Clock::time_point{} + 1h;
}  // namespace

TEST_CASE("InFlightCap grants permits up to its limit and refuses the next") {
  InFlightCap cap(2);
  auto first = cap.try_acquire(kNow);
  auto second = cap.try_acquire(kNow);
  REQUIRE(first);
  REQUIRE(second);
  CHECK(cap.in_use() == 2);
  CHECK(cap.full());
  CHECK_FALSE(cap.try_acquire(kNow));
  CHECK(cap.in_use() == 2);
}

TEST_CASE("A permit returns when released, once, or when dropped") {
  InFlightCap cap(1);
  auto permit = cap.try_acquire(kNow);
  REQUIRE(permit);
  permit->release();
  CHECK(cap.in_use() == 0);
  permit->release();
  CHECK(cap.in_use() == 0);

  {
    auto scoped = cap.try_acquire(kNow);
    REQUIRE(scoped);
    CHECK(cap.full());
  }
  CHECK(cap.in_use() == 0);
}

TEST_CASE("A moved permit is returned once, by its new owner") {
  InFlightCap cap(1);
  auto permit = cap.try_acquire(kNow);
  REQUIRE(permit);
  InFlightCap::Permit moved = std::move(*permit);
  CHECK_FALSE(permit->held());
  CHECK(moved.held());
  permit.reset();
  CHECK(cap.in_use() == 1);
  moved.release();
  CHECK(cap.in_use() == 0);
}

TEST_CASE("Move-assigning over a held permit returns the old one") {
  InFlightCap cap(2);
  auto a = cap.try_acquire(kNow);
  auto b = cap.try_acquire(kNow);
  REQUIRE(a);
  REQUIRE(b);
  *a = std::move(*b);
  CHECK(cap.in_use() == 1);
  a.reset();
  CHECK(cap.in_use() == 0);
}

TEST_CASE("InFlightCap of 0 is unlimited but still counts") {
  InFlightCap cap(0);
  std::vector<InFlightCap::Permit> permits;
  for (int i = 0; i < 1000; ++i) {
    auto permit = cap.try_acquire(kNow);
    REQUIRE(permit);
    permits.push_back(std::move(*permit));
  }
  CHECK(cap.unlimited());
  CHECK_FALSE(cap.full());
  CHECK(cap.in_use() == 1000);
  permits.clear();
  CHECK(cap.in_use() == 0);
}

TEST_CASE("The cap knows when the calls out were sent, on average, as they come and go") {
  InFlightCap cap(0);
  CHECK_FALSE(cap.mean_sent());
  auto first = cap.try_acquire(kNow);
  auto second = cap.try_acquire(kNow + 2s);
  auto third = cap.try_acquire(kNow + 4s);
  REQUIRE((first && second && third));
  CHECK(cap.mean_sent() == kNow + 2s);
  first->release();
  CHECK(cap.mean_sent() == kNow + 3s);
  // A permit moved keeps its time; one assigned over returns the old one's.
  InFlightCap::Permit moved = std::move(*third);
  CHECK(cap.mean_sent() == kNow + 3s);
  *second = std::move(moved);
  CHECK(cap.in_use() == 1);
  CHECK(cap.mean_sent() == kNow + 4s);
  second.reset();
  CHECK_FALSE(cap.mean_sent());
}

TEST_CASE("A negative in-flight cap is a configuration error") {
  CHECK_THROWS_AS(InFlightCap(-1), std::invalid_argument);
}
