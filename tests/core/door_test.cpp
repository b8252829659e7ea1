#include <doctest/doctest.h>

#include <variant>
#include <vector>

#include "fairlane/core/door.hpp"

using fairlane::BudgetLimits;
using fairlane::Door;
using fairlane::DoorAccepted;
using fairlane::DoorBusy;
using fairlane::DoorConfig;
using fairlane::DoorRequestTooLarge;
using fairlane::DoorUserQueueFull;
using fairlane::Estimator;
using fairlane::EstimatorConfig;
using fairlane::FairScheduler;
using fairlane::QueuedPage;

namespace {

constexpr BudgetLimits kLab{
    .requests_per_minute = 1'500, .tokens_per_minute = 300'000, .max_in_flight = 200};

struct Fixture {
  FairScheduler scheduler;
  Estimator estimator{scheduler, EstimatorConfig{.limits = kLab}};
  Door door{
      scheduler, estimator,
      DoorConfig{.max_wait_s = 5.0, .max_queued_pages_per_user = 10, .tokens_per_minute = 1'000}};

  void add_pages(fairlane::UserId user, fairlane::JobId job, int count) {
    for (int i = 1; i <= count; ++i) scheduler.add(QueuedPage{job * 1000 + i, job, user, 800});
  }
};

}  // namespace

TEST_CASE("A page above a minute's TPM is refused as too large, naming the page") {
  Fixture f;
  const std::vector<std::int64_t> pages{500, 1'200, 900};
  const auto decision = f.door.admit(1, pages);
  REQUIRE(std::holds_alternative<DoorRequestTooLarge>(decision));
  const auto& too_large = std::get<DoorRequestTooLarge>(decision);
  CHECK(too_large.page == 2);
  CHECK(too_large.tokens == 1'200);
  CHECK(too_large.ceiling == 1'000);
}

TEST_CASE("A user over their queued-page limit is refused with 429's numbers") {
  Fixture f;
  f.add_pages(1, 10, 8);
  const std::vector<std::int64_t> pages(3, 800);
  const auto decision = f.door.admit(1, pages);
  REQUIRE(std::holds_alternative<DoorUserQueueFull>(decision));
  const auto& full = std::get<DoorUserQueueFull>(decision);
  CHECK(full.queued == 8);
  CHECK(full.adding == 3);
  CHECK(full.limit == 10);
  // Two more pages still fit.
  CHECK(std::holds_alternative<DoorAccepted>(f.door.admit(1, std::vector<std::int64_t>(2, 800))));
}

TEST_CASE("A job that would wait past max_wait is busy, with position and Retry-After") {
  Fixture f;
  f.add_pages(1, 10, 10);
  f.add_pages(2, 20, 10);
  f.add_pages(3, 30, 10);
  // User 4, 10 pages: j = 1, k = 10. position = 1 + 1 + 1 = 3.
  //   ahead of last = 10 + 10 + 10 + 9 = 39; eta = 40 / 6.25 + 2 = 8.4 s > 5 s.
  //   Retry-After = ceil(8.4 - 5) = 4.
  const auto decision = f.door.admit(4, std::vector<std::int64_t>(10, 800));
  REQUIRE(std::holds_alternative<DoorBusy>(decision));
  const auto& busy = std::get<DoorBusy>(decision);
  CHECK(busy.position == 3);
  CHECK(busy.estimated_wait_s == doctest::Approx(8.4));
  CHECK(busy.max_wait_s == 5.0);
  CHECK(busy.retry_after_s == 4);
}

TEST_CASE("A job within max_wait is accepted with its estimate, and estimate() says the same") {
  Fixture f;
  f.add_pages(1, 10, 4);
  // User 2, 2 pages: position = min(4, 1) = 1; ahead of last = min(4, 2) + 1 = 3;
  //   eta = 4 / 6.25 + 2 = 2.64 s.
  const auto decision = f.door.admit(2, std::vector<std::int64_t>(2, 800));
  REQUIRE(std::holds_alternative<DoorAccepted>(decision));
  CHECK(std::get<DoorAccepted>(decision).estimate.position == 1);
  CHECK(std::get<DoorAccepted>(decision).estimate.eta_seconds == doctest::Approx(2.64));

  const auto estimate = f.door.estimate(2, 2, 800);
  REQUIRE(std::holds_alternative<DoorAccepted>(estimate));
  CHECK(std::get<DoorAccepted>(estimate).estimate.eta_seconds == doctest::Approx(2.64));
  CHECK(std::holds_alternative<DoorRequestTooLarge>(f.door.estimate(2, 2, 5'000)));
}

TEST_CASE("Busy's Retry-After is at least 1 even a hair over max_wait") {
  Fixture f;
  // User 1, 19 pages alone: ahead of last = 18; eta = 19 / 6.25 + 2 = 5.04 s: 0.04 s over.
  f.scheduler.set_weight(1, 1);
  const auto decision = f.door.estimate(1, 19, 800);
  REQUIRE(std::holds_alternative<DoorUserQueueFull>(decision));  // 19 > 10 pages
  Fixture roomy;
  Door door{roomy.scheduler, roomy.estimator,
            DoorConfig{.max_wait_s = 5.0, .max_queued_pages_per_user = 100}};
  const auto busy = door.estimate(1, 19, 800);
  REQUIRE(std::holds_alternative<DoorBusy>(busy));
  CHECK(std::get<DoorBusy>(busy).estimated_wait_s == doctest::Approx(5.04));
  CHECK(std::get<DoorBusy>(busy).retry_after_s == 1);
}
