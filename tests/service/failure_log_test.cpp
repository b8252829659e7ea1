#include "service/failure_log.hpp"

#include <doctest/doctest.h>

#include <chrono>

using namespace std::chrono_literals;
using fairlane::service::FailureLog;

TEST_CASE("A failure that repeats is logged first, then once a minute, then when it ends") {
  FailureLog log("the lanes could not be read", "the lanes are read again");
  const FailureLog::TimePoint t0{};
  CHECK_FALSE(log.succeeded(t0).has_value());  // nothing had failed

  const auto first = log.failed("connection refused", t0);
  REQUIRE(first.has_value());
  CHECK(*first == "fairlane: the lanes could not be read: connection refused");
  // A try a second, for 59 s: not a line more.
  for (int s = 1; s < 60; ++s) CHECK_FALSE(log.failed("connection refused", t0 + s * 1s));
  const auto minute = log.failed("timed out", t0 + 60s);
  REQUIRE(minute.has_value());
  CHECK(*minute ==
        "fairlane: the lanes could not be read: timed out (60 more times in the last 60 s)");
  CHECK_FALSE(log.failed("timed out", t0 + 61s));

  const auto back = log.succeeded(t0 + 90s);
  REQUIRE(back.has_value());
  CHECK(*back == "fairlane: the lanes are read again, after 62 failures over 90 s");
  CHECK_FALSE(log.succeeded(t0 + 91s).has_value());
  // A new failure is news again.
  CHECK(log.failed("reset", t0 + 100s).has_value());
}
