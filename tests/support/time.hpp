// Small helpers for tests that read durations and admissions as plain numbers.
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <utility>
#include <variant>

#include "fairlane/core/budget.hpp"

namespace fairlane::testing {

// A duration as whole microseconds: every wait a bucket computes is one.
inline std::int64_t micros(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::microseconds>(d).count();
}

// The lease an admission must have granted; fails the test otherwise.
inline Lease expect_lease(Admission admission) {
  REQUIRE_MESSAGE(std::holds_alternative<Lease>(admission), "expected the page to be admitted");
  return std::move(std::get<Lease>(admission));
}

// The wait an admission must have answered; fails the test otherwise.
inline Wait expect_wait(const Admission& admission) {
  REQUIRE_MESSAGE(std::holds_alternative<Wait>(admission), "expected the page to wait");
  return std::get<Wait>(admission);
}

}  // namespace fairlane::testing
