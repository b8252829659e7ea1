#include <doctest/doctest.h>

#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "fairlane/core/in_flight_cap.hpp"

using fairlane::InFlightCap;

TEST_CASE("InFlightCap grants permits up to its limit and refuses the next") {
  InFlightCap cap(2);
  auto first = cap.try_acquire();
  auto second = cap.try_acquire();
  REQUIRE(first);
  REQUIRE(second);
  CHECK(cap.in_use() == 2);
  CHECK(cap.full());
  CHECK_FALSE(cap.try_acquire());
  CHECK(cap.in_use() == 2);
}

TEST_CASE("A permit returns when released, once, or when dropped") {
  InFlightCap cap(1);
  auto permit = cap.try_acquire();
  REQUIRE(permit);
  permit->release();
  CHECK(cap.in_use() == 0);
  permit->release();
  CHECK(cap.in_use() == 0);

  {
    auto scoped = cap.try_acquire();
    REQUIRE(scoped);
    CHECK(cap.full());
  }
  CHECK(cap.in_use() == 0);
}

TEST_CASE("A moved permit is returned once, by its new owner") {
  InFlightCap cap(1);
  auto permit = cap.try_acquire();
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
  auto a = cap.try_acquire();
  auto b = cap.try_acquire();
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
    auto permit = cap.try_acquire();
    REQUIRE(permit);
    permits.push_back(std::move(*permit));
  }
  CHECK(cap.unlimited());
  CHECK_FALSE(cap.full());
  CHECK(cap.in_use() == 1000);
  permits.clear();
  CHECK(cap.in_use() == 0);
}

TEST_CASE("A negative in-flight cap is a configuration error") {
  CHECK_THROWS_AS(InFlightCap(-1), std::invalid_argument);
}
