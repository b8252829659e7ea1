#include <doctest/doctest.h>

#include <chrono>
#include <variant>
#include <vector>

#include "fairlane/core/door.hpp"

using fairlane::BudgetLimits;
using fairlane::Door;
using fairlane::DoorAccepted;
using fairlane::DoorBusy;
using fairlane::DoorConfig;
using fairlane::DoorJobTooLarge;
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

TEST_CASE("A job the queue would delay past max_wait is busy, with position and Retry-After") {
  Fixture f;
  for (fairlane::UserId user = 1; user <= 4; ++user) f.add_pages(user, user * 10, 10);
  // User 5, 10 pages: j = 1, k = 10. position = 1 + 1 + 1 + 1 = 4.
  //   ahead of last = 4 x 10 + 9 = 49; eta = 50 / 6.25 + 2 = 10 s.
  //   own time = 10 / 6.25 + 2 = 3.6 s: the queue adds 6.4 s > 5 s.
  //   Retry-After = ceil(6.4 - 5) = 2.
  const auto decision = f.door.admit(5, std::vector<std::int64_t>(10, 800));
  REQUIRE(std::holds_alternative<DoorBusy>(decision));
  const auto& busy = std::get<DoorBusy>(decision);
  CHECK(busy.position == 4);
  CHECK(busy.estimated_wait_s == doctest::Approx(6.4));
  CHECK(busy.eta_s == doctest::Approx(10.0));
  CHECK(busy.max_wait_s == 5.0);
  CHECK(busy.retry_after_s == 2);
}

TEST_CASE("On an idle service a long book waits for nothing: it is accepted, not busy") {
  FairScheduler scheduler;
  Estimator estimator{scheduler, EstimatorConfig{.limits = kLab}};
  Door door{scheduler, estimator, DoorConfig{.max_wait_s = 60.0}};
  // 500 pages alone: 500 / 6.25 + 2 = 82 s, longer than max_wait, but nothing is ahead.
  const auto decision = door.admit(1, std::vector<std::int64_t>(500, 800));
  REQUIRE(std::holds_alternative<DoorAccepted>(decision));
  CHECK(std::get<DoorAccepted>(decision).estimate.eta_seconds == doctest::Approx(82.0));
  CHECK(std::get<DoorAccepted>(decision).estimate.own_seconds == doctest::Approx(82.0));
  CHECK(std::holds_alternative<DoorAccepted>(door.estimate(1, 9'000, 800)));
}

TEST_CASE("A job longer alone than max_job_s is job_too_large, naming the parts that fit") {
  FairScheduler scheduler;
  Estimator estimator{scheduler, EstimatorConfig{.limits = kLab}};
  Door door{scheduler, estimator, DoorConfig{.max_wait_s = 60.0, .max_job_s = 30.0}};
  // 500 pages alone take 82 s > 30 s. A page takes 0.16 s after the 2 s of a call:
  //   floor((30 - 2) / 0.16) = 175 pages fit; 500 pages are 3 parts of at most 175.
  const auto decision = door.admit(1, std::vector<std::int64_t>(500, 800));
  REQUIRE(std::holds_alternative<DoorJobTooLarge>(decision));
  const auto& large = std::get<DoorJobTooLarge>(decision);
  CHECK(large.pages == 500);
  CHECK(large.alone_s == doctest::Approx(82.0));
  CHECK(large.max_job_s == 30.0);
  CHECK(large.max_pages == 175);
  CHECK(large.parts == 3);
  // Never busy instead, however long the queue: retrying cannot help.
  for (fairlane::UserId user = 2; user <= 20; ++user) {
    for (int i = 1; i <= 100; ++i) scheduler.add(QueuedPage{user * 1000 + i, user, user, 800});
  }
  CHECK(std::holds_alternative<DoorJobTooLarge>(door.estimate(1, 500, 800)));
  CHECK(std::holds_alternative<DoorBusy>(door.estimate(1, 175, 800)));
}

TEST_CASE(
    "The parts job_too_large names fit, when latencies vary and when a call alone is too long") {
  using namespace std::chrono_literals;
  FairScheduler scheduler;
  Estimator estimator{scheduler, EstimatorConfig{.limits = kLab}};
  // Calls of 1 s and 3 s: the last answer of a job waits for the slowest of its last calls,
  // a margin that hardly shrinks with fewer pages, so a part cut to the steady rate alone
  // would be refused again.
  for (int i = 0; i < 20; ++i) {
    estimator.record_settled(800, 800, i % 2 == 0 ? 1s : 3s);
  }
  Door door{scheduler, estimator, DoorConfig{.max_wait_s = 600.0, .max_job_s = 100.0}};
  const auto decision = door.estimate(1, 1'000, 800);
  REQUIRE(std::holds_alternative<DoorJobTooLarge>(decision));
  const auto& large = std::get<DoorJobTooLarge>(decision);
  REQUIRE(large.max_pages > 0);
  CHECK(std::holds_alternative<DoorAccepted>(door.estimate(1, large.max_pages, 800)));
  CHECK(std::holds_alternative<DoorJobTooLarge>(door.estimate(1, large.max_pages + 1, 800)));
  CHECK(large.parts == (1'000 + large.max_pages - 1) / large.max_pages);

  // A limit below a call's own latency: not a single page fits, and the answer says so
  // rather than "0 parts of 0 pages".
  Door strict{scheduler, estimator, DoorConfig{.max_wait_s = 600.0, .max_job_s = 1.0}};
  const auto none = strict.estimate(1, 10, 800);
  REQUIRE(std::holds_alternative<DoorJobTooLarge>(none));
  CHECK(std::get<DoorJobTooLarge>(none).max_pages == 0);
  CHECK(std::get<DoorJobTooLarge>(none).parts == 0);
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
  // Three lanes of 10 and one of 2 ahead of a 10-page job: others ahead of its last page =
  //   10 + 10 + 10 + 2 = 32 pages, 32 / 6.25 = 5.12 s the queue adds: 0.12 s over.
  for (fairlane::UserId user = 1; user <= 3; ++user) f.add_pages(user, user * 10, 10);
  f.add_pages(4, 40, 2);
  const auto busy = f.door.estimate(5, 10, 800);
  REQUIRE(std::holds_alternative<DoorBusy>(busy));
  CHECK(std::get<DoorBusy>(busy).estimated_wait_s == doctest::Approx(5.12));
  CHECK(std::get<DoorBusy>(busy).retry_after_s == 1);
}
