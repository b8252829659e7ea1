#include <doctest/doctest.h>

#include <chrono>
#include <optional>
#include <variant>

#include "core/fake_clock.hpp"
#include "fairlane/core/budget.hpp"
#include "support/time.hpp"

using namespace std::chrono_literals;
using fairlane::Budget;
using fairlane::BudgetLimits;
using fairlane::FakeClock;
using fairlane::Lease;
using fairlane::Limit;
using fairlane::retry_after_seconds;
using fairlane::TooLarge;
using fairlane::testing::expect_lease;
using fairlane::testing::expect_wait;
using fairlane::testing::micros;

TEST_CASE("Worked example: RPM 3, TPM 1000, reserve, settle, wait 1.2 s, admit at 1.2 s") {
  FakeClock clock;
  Budget budget(clock, BudgetLimits{.requests_per_minute = 3, .tokens_per_minute = 1000});

  Lease first = expect_lease(budget.admit(300));
  CHECK(budget.requests().level() == 2.0);
  CHECK(budget.tokens().level() == 700.0);
  CHECK(micros(budget.tokens().time_until_full()) == 18'000'000);

  first.settle(120);
  CHECK(budget.tokens().level() == 880.0);

  const auto wait = expect_wait(budget.admit(900));
  CHECK(micros(wait.wait) == 1'200'000);
  CHECK(wait.limit == Limit::tokens);
  CHECK(retry_after_seconds(wait.wait) == 2);
  CHECK(budget.tokens().level() == 880.0);
  CHECK(budget.requests().level() == 2.0);

  clock.advance(wait.wait);
  CHECK(budget.requests().level() == 2.06);
  Lease second = expect_lease(budget.admit(900));
  CHECK(budget.tokens().level() == 0.0);
  CHECK(budget.requests().level() == 1.06);
  CHECK(budget.requests().remaining() == 1);
}

TEST_CASE(
    "A headroom is left unspent: a cost waits until it and the headroom fit, and reserves itself") {
  FakeClock clock;
  // 6,000 a minute: 100 a second. 50 kept unspent (half a second of refill).
  Budget budget(clock, BudgetLimits{.tokens_per_minute = 6'000, .token_headroom = 50});
  Lease burst = expect_lease(budget.admit(5'900));  // 5,900 + 50 fit the full 6,000
  CHECK(budget.tokens().level() == 100.0);
  // 80 would fit the 100 left, but not with the 50 kept: it waits 0.3 s for 130.
  const auto wait = expect_wait(budget.admit(80));
  CHECK(micros(wait.wait) == 300'000);
  CHECK(wait.limit == Limit::tokens);
  clock.advance(wait.wait);
  Lease next = expect_lease(budget.admit(80));
  CHECK(budget.tokens().level() == 50.0);  // the headroom, unspent
  burst.settle(5'900);
  next.settle(80);

  // A cost within the headroom of the capacity waits only for a full bucket, and one above
  // the capacity is still too large (the headroom never makes a page unfit).
  clock.advance(60s);
  expect_lease(budget.admit(5'990)).settle(5'990);
  CHECK(std::holds_alternative<TooLarge>(budget.admit(6'001)));
  CHECK(budget.effective_limits().token_headroom == 50);
}

TEST_CASE("Burst then refill: 60 at once, the 61st waits 1 s, then one a second") {
  FakeClock clock;
  Budget budget(clock, BudgetLimits{.requests_per_minute = 60});

  for (int i = 0; i < 60; ++i) expect_lease(budget.admit(0)).settle(0);
  auto wait = expect_wait(budget.admit(0));
  CHECK(micros(wait.wait) == 1'000'000);
  CHECK(wait.limit == Limit::requests);

  for (int second = 0; second < 5; ++second) {
    clock.advance(1s);
    expect_lease(budget.admit(0)).settle(0);
    CHECK(micros(expect_wait(budget.admit(0)).wait) == 1'000'000);
  }

  // Ten idle minutes bank only a minute's worth.
  clock.advance(10min);
  for (int i = 0; i < 60; ++i) expect_lease(budget.admit(0)).settle(0);
  CHECK(micros(expect_wait(budget.admit(0)).wait) == 1'000'000);
}

TEST_CASE("Overrun debt: TPM 1000, reserve 1000, settle 1100, a 10-token page waits 6.6 s") {
  FakeClock clock;
  Budget budget(clock, BudgetLimits{.tokens_per_minute = 1000});
  expect_lease(budget.admit(1000)).settle(1100);
  CHECK(budget.tokens().level() == -100.0);

  const auto wait = expect_wait(budget.admit(10));
  CHECK(micros(wait.wait) == 6'600'000);
  CHECK(wait.limit == Limit::tokens);
  clock.advance(wait.wait);
  expect_lease(budget.admit(10));
  CHECK(budget.tokens().level() == 0.0);
}

TEST_CASE("Cancel returns the tokens and the permit but not the request, and counts once") {
  FakeClock clock;
  Budget budget(
      clock,
      BudgetLimits{.requests_per_minute = 10, .tokens_per_minute = 1000, .max_in_flight = 1});

  Lease lease = expect_lease(budget.admit(400));
  CHECK(budget.tokens().level() == 600.0);
  CHECK(budget.in_flight().in_use() == 1);
  CHECK(lease.reserved_tokens() == 400);

  lease.cancel();
  CHECK_FALSE(lease.open());
  CHECK(budget.tokens().level() == 1000.0);
  CHECK(budget.in_flight().in_use() == 0);
  CHECK(budget.requests().level() == 9.0);  // the provider counted the request

  // Spend some tokens elsewhere so a wrong refund would show.
  Lease other = expect_lease(budget.admit(500));
  lease.settle(0);
  lease.cancel();
  CHECK(budget.tokens().level() == 500.0);
  CHECK(budget.in_flight().in_use() == 1);
  CHECK(budget.requests().level() == 8.0);

  other.settle(500);
  other.cancel();
  CHECK(budget.tokens().level() == 500.0);
  CHECK(budget.in_flight().in_use() == 0);
}

TEST_CASE("Settle returns the permit, and a dropped lease returns it and keeps its tokens spent") {
  FakeClock clock;
  Budget budget(clock, BudgetLimits{.tokens_per_minute = 1000, .max_in_flight = 1});
  {
    Lease lease = expect_lease(budget.admit(300));
    CHECK(expect_wait(budget.admit(1)).limit == Limit::concurrency);
  }
  CHECK(budget.in_flight().in_use() == 0);
  CHECK(budget.tokens().level() == 700.0);

  Lease lease = expect_lease(budget.admit(300));
  lease.settle(100);
  CHECK(budget.in_flight().in_use() == 0);
  CHECK(budget.tokens().level() == 600.0);
}

TEST_CASE("1001 tokens against TPM 1000 is too large even when full, and 1000 fits") {
  FakeClock clock;
  Budget budget(clock, BudgetLimits{.requests_per_minute = 10, .tokens_per_minute = 1000});
  const auto refusal = budget.admit(1001);
  REQUIRE(std::holds_alternative<TooLarge>(refusal));
  CHECK(std::get<TooLarge>(refusal).tokens == 1001);
  CHECK(std::get<TooLarge>(refusal).capacity == 1000);
  CHECK(budget.requests().level() == 10.0);
  CHECK(budget.tokens().level() == 1000.0);

  expect_lease(budget.admit(1000));
  CHECK(budget.tokens().level() == 0.0);
}

TEST_CASE(
    "Order: a refusal for concurrency takes no tokens, and one for tokens spends no request") {
  FakeClock clock;
  Budget budget(
      clock,
      BudgetLimits{.requests_per_minute = 10, .tokens_per_minute = 1000, .max_in_flight = 1});

  SUBCASE("in-flight cap full") {
    Lease holder = expect_lease(budget.admit(100));
    const auto wait = expect_wait(budget.admit(100));
    CHECK(wait.limit == Limit::concurrency);
    CHECK(micros(wait.wait) == 0);  // the buckets could take it: only a permit is missing
    CHECK(budget.tokens().level() == 900.0);
    CHECK(budget.requests().level() == 9.0);
    CHECK(budget.in_flight().in_use() == 1);
  }
  SUBCASE("tokens short") {
    expect_lease(budget.admit(950)).settle(950);
    const auto wait = expect_wait(budget.admit(100));
    CHECK(wait.limit == Limit::tokens);
    CHECK(budget.requests().level() == 9.0);
    CHECK(budget.in_flight().in_use() == 0);
    CHECK(budget.tokens().level() == 50.0);
  }
  SUBCASE("requests short: nothing else is taken, and the wait covers the tokens too") {
    Budget tight(clock, BudgetLimits{.requests_per_minute = 1, .tokens_per_minute = 1000});
    expect_lease(tight.admit(1000)).settle(1000);
    // Requests need 60 s; tokens for 500 would need 30 s. One wake-up covers both.
    const auto wait = expect_wait(tight.admit(500));
    CHECK(wait.limit == Limit::requests);
    CHECK(micros(wait.wait) == 60'000'000);
    CHECK(tight.tokens().level() == 0.0);
  }
}

TEST_CASE("When both buckets are short, the one with the longer wait is the limit named") {
  FakeClock clock;
  // 2 requests a second, 1 token a second.
  Budget budget(clock, BudgetLimits{.requests_per_minute = 120, .tokens_per_minute = 60});
  expect_lease(budget.admit(60)).settle(60);
  for (int i = 0; i < 119; ++i) expect_lease(budget.admit(0)).settle(0);
  CHECK(budget.requests().level() == 0.0);
  CHECK(budget.tokens().level() == 0.0);

  // A request is 0.5 s away, 30 tokens are 30 s away: tokens hold the page back.
  const auto wait = expect_wait(budget.admit(30));
  CHECK(wait.limit == Limit::tokens);
  CHECK(micros(wait.wait) == 30'000'000);
  // A request alone is 0.5 s away: requests hold it back.
  const auto short_wait = expect_wait(budget.admit(0));
  CHECK(short_wait.limit == Limit::requests);
  CHECK(micros(short_wait.wait) == 500'000);
}

TEST_CASE("TPM 1000 announced as 500: after an empty bucket a 100-token page waits 12 s, not 6 s") {
  FakeClock clock;
  Budget budget(
      clock,
      BudgetLimits{.requests_per_minute = 60, .tokens_per_minute = 1000, .max_in_flight = 4});
  budget.follow_announced(30, 500);
  const BudgetLimits effective = budget.effective_limits();
  CHECK(effective.requests_per_minute == 30);
  CHECK(effective.tokens_per_minute == 500);
  CHECK(effective.max_in_flight == 4);
  CHECK(budget.limits().requests_per_minute == 60);  // the configured ones are kept
  CHECK(budget.limits().tokens_per_minute == 1000);
  CHECK(budget.tokens().level() == 500.0);
  CHECK(budget.requests().level() == 30.0);

  expect_lease(budget.admit(500)).settle(500);
  const auto wait = expect_wait(budget.admit(100));
  CHECK(wait.limit == Limit::tokens);
  CHECK(micros(wait.wait) == 12'000'000);
  clock.advance(wait.wait);
  expect_lease(budget.admit(100));
  CHECK(budget.tokens().level() == 0.0);
  // 1 request spent and 12 s at 30 a minute (6) refilled, capped at 30.
  CHECK(budget.requests().level() == 29.0);
}

TEST_CASE(
    "A page above the announced limit waits for a full bucket, and only one above the "
    "configured limit is too large") {
  FakeClock clock;
  Budget budget(clock, BudgetLimits{.requests_per_minute = 10, .tokens_per_minute = 1000});
  budget.follow_announced(std::nullopt, 300);
  expect_lease(budget.admit(150)).settle(150);
  // 800 > 300: it waits until the bucket is full again (150 tokens at 5 a second), not for
  // a limit the provider may never announce.
  const auto wait = expect_wait(budget.admit(800));
  CHECK(wait.limit == Limit::tokens);
  CHECK(micros(wait.wait) == 30'000'000);
  clock.advance(wait.wait);
  expect_lease(budget.admit(800)).settle(800);
  CHECK(budget.tokens().level() == -500.0);

  const auto refusal = budget.admit(1001);
  REQUIRE(std::holds_alternative<TooLarge>(refusal));
  CHECK(std::get<TooLarge>(refusal).capacity == 1000);  // the configured capacity
}

TEST_CASE(
    "Absent or non-positive announcements change nothing, and a higher one restores the "
    "configured limits and no more") {
  FakeClock clock;
  Budget budget(clock, BudgetLimits{.requests_per_minute = 60, .tokens_per_minute = 1000});
  budget.follow_announced(20, 200);
  budget.follow_announced(std::nullopt, std::nullopt);
  budget.follow_announced(0, -1);
  CHECK(budget.effective_limits().requests_per_minute == 20);
  CHECK(budget.effective_limits().tokens_per_minute == 200);
  budget.follow_announced(600, 10'000);
  CHECK(budget.effective_limits().requests_per_minute == 60);
  CHECK(budget.effective_limits().tokens_per_minute == 1000);
  // The level does not jump with the capacity: it refills to it, at the configured rate.
  CHECK(budget.tokens().level() == 200.0);
  clock.advance(30s);
  CHECK(budget.tokens().level() == 700.0);
}

TEST_CASE("An unlimited budget ignores announced limits") {
  FakeClock clock;
  Budget budget(clock, BudgetLimits{});
  budget.follow_announced(10, 100);
  CHECK(budget.effective_limits().requests_per_minute == 0);
  CHECK(budget.effective_limits().tokens_per_minute == 0);
  for (int i = 0; i < 100; ++i) expect_lease(budget.admit(1'000)).settle(1'000);
}

TEST_CASE("Zero limits mean unlimited: everything is admitted at once") {
  FakeClock clock;
  Budget budget(clock, BudgetLimits{});
  for (int i = 0; i < 10'000; ++i) expect_lease(budget.admit(1'000'000)).settle(2'000'000);
  CHECK(budget.in_flight().in_use() == 0);
}

TEST_CASE("Retry-After is whole seconds rounded up, at least 1") {
  CHECK(retry_after_seconds(0s) == 1);
  CHECK(retry_after_seconds(1ms) == 1);
  CHECK(retry_after_seconds(1200ms) == 2);
  CHECK(retry_after_seconds(59s) == 59);
  CHECK(retry_after_seconds(59001ms) == 60);
  CHECK(retry_after_seconds(-5s) == 1);
  CHECK(retry_after_seconds(fairlane::Clock::duration::max()) ==
        fairlane::Clock::duration::max().count() / 1'000'000'000 + 1);
}

TEST_CASE("Limits are named as the API and metrics name them") {
  CHECK(fairlane::to_string(Limit::requests) == "requests");
  CHECK(fairlane::to_string(Limit::concurrency) == "concurrency");
  CHECK(fairlane::to_string(Limit::tokens) == "tokens");
}
