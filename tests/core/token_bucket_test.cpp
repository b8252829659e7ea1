#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <stdexcept>

#include "core/fake_clock.hpp"
#include "fairlane/core/token_bucket.hpp"
#include "support/time.hpp"

using namespace std::chrono_literals;
using fairlane::FakeClock;
using fairlane::TokenBucket;
using fairlane::testing::micros;

TEST_CASE("A bucket starts full and a take lowers it") {
  FakeClock clock;
  TokenBucket bucket(clock, 1000);
  CHECK(bucket.level() == 1000.0);
  CHECK(bucket.try_take(300));
  CHECK(bucket.level() == 700.0);
  CHECK(bucket.remaining() == 700);
}

TEST_CASE("A take that does not fit changes nothing and names the exact wait") {
  FakeClock clock;
  TokenBucket bucket(clock, 1000);  // refills 1000/60 tokens a second
  REQUIRE(bucket.try_take(1000));
  CHECK_FALSE(bucket.try_take(10));
  CHECK(bucket.level() == 0.0);
  // 10 tokens at 1000/60 per second: 0.6 s.
  CHECK(micros(*bucket.wait_for(10)) == 600'000);
  clock.advance(599'999us);
  CHECK_FALSE(bucket.try_take(10));
  clock.advance(1us);
  CHECK(bucket.try_take(10));
}

TEST_CASE("A wait that does not divide evenly is rounded up to the first microsecond that fits") {
  FakeClock clock;
  TokenBucket bucket(clock, 7);  // 7 a minute: one token every 8.571428... s
  REQUIRE(bucket.try_take(7));
  CHECK(micros(*bucket.wait_for(1)) == 8'571'429);
  clock.advance(8'571'428us);
  CHECK_FALSE(bucket.try_take(1));
  clock.advance(1us);
  CHECK(bucket.try_take(1));
}

TEST_CASE("Refill is capped at the capacity") {
  FakeClock clock;
  TokenBucket bucket(clock, 60);
  REQUIRE(bucket.try_take(60));
  clock.advance(30s);
  CHECK(bucket.level() == 30.0);
  clock.advance(std::chrono::hours(24 * 365));
  CHECK(bucket.level() == 60.0);
  CHECK(bucket.time_until_full() == 0s);
}

TEST_CASE("Clock steps finer than a microsecond are not lost") {
  FakeClock clock;
  TokenBucket bucket(clock, 60);  // one token a second
  REQUIRE(bucket.try_take(60));
  for (int i = 0; i < 4000; ++i) {
    clock.advance(1500ns);
    CHECK_FALSE(bucket.try_take(1));  // refills at every step, half a microsecond pending
  }
  // 4000 x 1.5 us = 6 ms: exactly six thousandths of a token.
  CHECK(bucket.level() == 0.006);
  CHECK(micros(*bucket.wait_for(1)) == 994'000);
}

TEST_CASE("A reservation settles with the actual amount: refund or overrun debt") {
  FakeClock clock;
  TokenBucket bucket(clock, 1000);

  auto refund = bucket.reserve(300);
  REQUIRE(refund);
  CHECK(bucket.level() == 700.0);
  refund->settle(120);
  CHECK(bucket.level() == 880.0);
  CHECK_FALSE(refund->open());

  // Overrun debt (issue example 3): the level goes below zero and is waited off.
  TokenBucket debt_bucket(clock, 1000);
  auto overrun = debt_bucket.reserve(1000);
  REQUIRE(overrun);
  overrun->settle(1100);
  CHECK(debt_bucket.level() == -100.0);
  CHECK(debt_bucket.remaining() == 0);
  // (10 + 100) tokens at 1000/60 per second: 6.6 s.
  CHECK(micros(*debt_bucket.wait_for(10)) == 6'600'000);
}

TEST_CASE("A refund never lifts the level above the capacity") {
  FakeClock clock;
  TokenBucket bucket(clock, 1000);
  auto reservation = bucket.reserve(500);
  REQUIRE(reservation);
  clock.advance(60s);  // refilled to full while the call ran
  reservation->settle(0);
  CHECK(bucket.level() == 1000.0);
}

TEST_CASE("A reservation counts exactly once") {
  FakeClock clock;
  TokenBucket bucket(clock, 1000);

  SUBCASE("cancel returns everything, and a second cancel or a settle does nothing") {
    auto reservation = bucket.reserve(400);
    REQUIRE(reservation);
    REQUIRE(bucket.try_take(100));
    reservation->cancel();
    CHECK(bucket.level() == 900.0);
    reservation->cancel();
    reservation->settle(0);
    CHECK(bucket.level() == 900.0);
  }
  SUBCASE("settle then cancel refunds only once") {
    auto reservation = bucket.reserve(400);
    REQUIRE(reservation);
    REQUIRE(bucket.try_take(100));
    reservation->settle(100);
    CHECK(bucket.level() == 800.0);
    reservation->cancel();
    reservation->settle(0);
    CHECK(bucket.level() == 800.0);
  }
  SUBCASE("a moved-from reservation is closed; its new owner settles") {
    auto reservation = bucket.reserve(400);
    REQUIRE(reservation);
    TokenBucket::Reservation moved = std::move(*reservation);
    CHECK_FALSE(reservation->open());
    CHECK(reservation->reserved() == 0);
    CHECK(moved.reserved() == 400);
    reservation->cancel();
    CHECK(bucket.level() == 600.0);
    moved.cancel();
    CHECK(bucket.level() == 1000.0);
  }
  SUBCASE("a dropped open reservation keeps its tokens spent") {
    {
      auto reservation = bucket.reserve(400);
      REQUIRE(reservation);
    }
    CHECK(bucket.level() == 600.0);
  }
}

TEST_CASE("A reservation that does not fit takes nothing") {
  FakeClock clock;
  TokenBucket bucket(clock, 1000);
  REQUIRE(bucket.try_take(700));
  CHECK_FALSE(bucket.reserve(301));
  CHECK(bucket.level() == 300.0);
}

TEST_CASE("sync_down lowers the level to what the provider reports and never raises it") {
  FakeClock clock;
  TokenBucket bucket(clock, 1000);
  bucket.sync_down(250);
  CHECK(bucket.level() == 250.0);
  bucket.sync_down(900);
  CHECK(bucket.level() == 250.0);
  bucket.sync_down(-5);
  CHECK(bucket.level() == 0.0);
  clock.advance(6s);  // refill continues from the synced level
  CHECK(bucket.level() == 100.0);
}

TEST_CASE("time_until_full is the exact refill time of what is missing") {
  FakeClock clock;
  TokenBucket bucket(clock, 1000);
  REQUIRE(bucket.try_take(300));
  CHECK(micros(bucket.time_until_full()) == 18'000'000);
  clock.advance(9s);
  CHECK(micros(bucket.time_until_full()) == 9'000'000);
}

TEST_CASE("A cost above the capacity never fits, and the capacity itself does") {
  FakeClock clock;
  TokenBucket bucket(clock, 1000);
  CHECK_FALSE(bucket.wait_for(1001).has_value());
  CHECK_FALSE(bucket.try_take(1001));
  CHECK(bucket.level() == 1000.0);
  CHECK(micros(*bucket.wait_for(1000)) == 0);
  CHECK(bucket.try_take(1000));
}

TEST_CASE("Capacity 0 means unlimited") {
  FakeClock clock;
  TokenBucket bucket(clock, 0);
  CHECK(bucket.unlimited());
  for (int i = 0; i < 100; ++i) CHECK(bucket.try_take(TokenBucket::kMaxCapacity));
  CHECK(std::isinf(bucket.level()));
  CHECK(micros(*bucket.wait_for(TokenBucket::kMaxCapacity)) == 0);
  auto reservation = bucket.reserve(5);
  REQUIRE(reservation);
  reservation->settle(50);
  bucket.sync_down(0);
  CHECK(bucket.try_take(1));
  CHECK(bucket.time_until_full() == 0s);
}

TEST_CASE("The largest capacity survives a deep debt and a long idle spell without overflow") {
  FakeClock clock;
  TokenBucket bucket(clock, TokenBucket::kMaxCapacity);
  auto reservation = bucket.reserve(TokenBucket::kMaxCapacity);
  REQUIRE(reservation);
  reservation->settle(TokenBucket::kMaxCapacity * 4);
  CHECK(bucket.level() == -3.0 * static_cast<double>(TokenBucket::kMaxCapacity));
  CHECK(micros(*bucket.wait_for(TokenBucket::kMaxCapacity)) == 4 * 60'000'000);
  clock.advance(std::chrono::hours(24 * 365 * 100));
  CHECK(bucket.level() == static_cast<double>(TokenBucket::kMaxCapacity));
}

TEST_CASE("Debt is bounded at four minutes of the bucket's own refill, so waits stay finite") {
  FakeClock clock;
  TokenBucket bucket(clock, 10);
  auto reservation = bucket.reserve(10);
  REQUIRE(reservation);
  reservation->settle(40'000'000'000);  // an absurd overrun
  CHECK(bucket.level() == -40.0);
  // (1 + 40) tokens at 10 a minute: 246 s.
  CHECK(micros(*bucket.wait_for(1)) == 246'000'000);
  CHECK(micros(bucket.time_until_full()) == 300'000'000);
}

TEST_CASE("A per-minute limit out of range is a configuration error") {
  FakeClock clock;
  CHECK_THROWS_AS(TokenBucket(clock, -1), std::invalid_argument);
  CHECK_THROWS_AS(TokenBucket(clock, TokenBucket::kMaxCapacity + 1), std::invalid_argument);
}

TEST_CASE("A lower announced limit caps the level and halves the refill") {
  FakeClock clock;
  TokenBucket bucket(clock, 1000);
  REQUIRE(bucket.try_take(200));
  bucket.limit_to(500);
  CHECK(bucket.capacity() == 500);
  CHECK(bucket.configured_capacity() == 1000);
  CHECK(bucket.level() == 500.0);  // 800 capped at the new capacity
  REQUIRE(bucket.try_take(500));
  // 10 tokens at 500/60 per second: 1.2 s, twice the 0.6 s of the configured rate.
  CHECK(micros(*bucket.wait_for(10)) == 1'200'000);
  clock.advance(6s);
  CHECK(bucket.level() == 50.0);
  clock.advance(std::chrono::hours(1));
  CHECK(bucket.level() == 500.0);
  CHECK(micros(bucket.time_until_full()) == 0);
}

TEST_CASE("The refill up to an announcement is credited at the rate before it") {
  FakeClock clock;
  TokenBucket bucket(clock, 600);  // 10 tokens a second
  REQUIRE(bucket.try_take(600));
  clock.advance(3s);  // 30 tokens refilled, not yet read by the bucket
  bucket.limit_to(300);
  CHECK(bucket.level() == 30.0);
  clock.advance(3s);  // 5 a second now
  CHECK(bucket.level() == 45.0);
  bucket.limit_to(600);  // back at 10 a second from here on
  CHECK(bucket.level() == 45.0);
  clock.advance(1500ms);
  CHECK(bucket.level() == 60.0);
  // 540 missing at 10 a second.
  CHECK(micros(bucket.time_until_full()) == 54'000'000);
}

TEST_CASE("A higher announcement raises the capacity back, never above the configured one") {
  FakeClock clock;
  TokenBucket bucket(clock, 1000);
  bucket.limit_to(400);
  CHECK(bucket.capacity() == 400);
  CHECK(bucket.level() == 400.0);
  bucket.limit_to(700);
  CHECK(bucket.capacity() == 700);
  CHECK(bucket.level() == 400.0);  // no tokens from nowhere: it refills to the new capacity
  clock.advance(60s);
  CHECK(bucket.level() == 700.0);
  bucket.limit_to(5000);
  CHECK(bucket.capacity() == 1000);
  clock.advance(std::chrono::hours(1));
  CHECK(bucket.level() == 1000.0);
  CHECK(micros(*bucket.wait_for(1000)) == 0);
}

TEST_CASE("An announcement of 0 or less is ignored, and an unlimited bucket ignores them all") {
  FakeClock clock;
  TokenBucket bucket(clock, 1000);
  bucket.limit_to(0);
  bucket.limit_to(-5);
  CHECK(bucket.capacity() == 1000);
  CHECK(bucket.level() == 1000.0);

  TokenBucket unlimited(clock, 0);
  unlimited.limit_to(10);
  CHECK(unlimited.unlimited());
  CHECK(unlimited.capacity() == 0);
  CHECK(unlimited.try_take(TokenBucket::kMaxCapacity));
}

TEST_CASE("A cost above the announced limit waits for a full bucket and leaves it in debt") {
  FakeClock clock;
  TokenBucket bucket(clock, 1000);
  bucket.limit_to(300);  // 5 tokens a second
  REQUIRE(bucket.try_take(100));
  // 600 > 300 fits once the bucket is full again: 100 tokens at 5 a second.
  CHECK(micros(*bucket.wait_for(600)) == 20'000'000);
  CHECK_FALSE(bucket.wait_for(1001).has_value());  // above the configured capacity: never
  CHECK_FALSE(bucket.try_take(600));
  CHECK(bucket.level() == 200.0);
  clock.advance(19'999'999us);
  CHECK_FALSE(bucket.try_take(600));
  clock.advance(1us);
  CHECK(bucket.try_take(600));
  CHECK(bucket.level() == -300.0);
  // (1 + 300) tokens at 5 a second: 60.2 s.
  CHECK(micros(*bucket.wait_for(1)) == 60'200'000);
}

TEST_CASE("Settle and cancel stay exact, and count once, across announcements") {
  FakeClock clock;
  TokenBucket bucket(clock, 1000);

  SUBCASE("a refund is capped at the lowered capacity") {
    auto reservation = bucket.reserve(400);
    REQUIRE(reservation);
    bucket.limit_to(500);
    CHECK(bucket.level() == 500.0);  // 600 capped
    reservation->settle(100);        // 300 back, capped at 500
    CHECK(bucket.level() == 500.0);
    reservation->settle(0);
    reservation->cancel();
    CHECK(bucket.level() == 500.0);
  }
  SUBCASE("an overrun is charged in full under a lowered capacity") {
    auto reservation = bucket.reserve(300);
    REQUIRE(reservation);
    bucket.limit_to(200);
    CHECK(bucket.level() == 200.0);
    reservation->settle(500);  // 200 more than reserved
    CHECK(bucket.level() == 0.0);
    reservation->cancel();
    CHECK(bucket.level() == 0.0);
  }
  SUBCASE("a cancel returns everything, up to the raised capacity") {
    bucket.limit_to(500);
    auto reservation = bucket.reserve(400);
    REQUIRE(reservation);
    CHECK(bucket.level() == 100.0);
    bucket.limit_to(800);
    reservation->cancel();
    CHECK(bucket.level() == 500.0);
    reservation->cancel();
    CHECK(bucket.level() == 500.0);
  }
}

TEST_CASE("A debt is not forgiven when the limit drops, and is waited off at the new rate") {
  FakeClock clock;
  TokenBucket bucket(clock, 1000);
  auto reservation = bucket.reserve(1000);
  REQUIRE(reservation);
  reservation->settle(5000);
  CHECK(bucket.level() == -4000.0);  // the floor: four minutes of the configured refill
  bucket.limit_to(10);
  CHECK(bucket.level() == -4000.0);
  // (1 + 4000) tokens at 10 a minute: 400.1 minutes.
  CHECK(micros(*bucket.wait_for(1)) == 24'006'000'000);
}

TEST_CASE("A deep debt at a tiny announced rate reports the longest wait, never overflowing") {
  FakeClock clock;
  TokenBucket bucket(clock, TokenBucket::kMaxCapacity);
  auto reservation = bucket.reserve(TokenBucket::kMaxCapacity);
  REQUIRE(reservation);
  reservation->settle(TokenBucket::kMaxCapacity * 4);
  CHECK(bucket.level() == -3.0 * static_cast<double>(TokenBucket::kMaxCapacity));
  bucket.limit_to(1);
  // 3 * 10^10 + 1 tokens at one a minute is far longer than a year.
  CHECK(*bucket.wait_for(1) == TokenBucket::kLongestWait);
  CHECK(bucket.time_until_full() == TokenBucket::kLongestWait);
  // A year later (525,600 tokens refilled) the debt is still there, and so is the answer.
  clock.advance(TokenBucket::kLongestWait);
  CHECK(bucket.level() < 0.0);
  CHECK(*bucket.wait_for(1) == TokenBucket::kLongestWait);
}

TEST_CASE(
    "A bucket lowered to what is left is full, but a large cost waits for the configured "
    "budget") {
  FakeClock clock;
  TokenBucket bucket(clock, 1000);
  REQUIRE(bucket.try_take(900));
  bucket.limit_to(100);
  CHECK(bucket.level() == 100.0);
  CHECK(micros(bucket.time_until_full()) == 0);
  // Full at 100, yet 500 more now would be 1400 in an instant against a limit of 1000: it
  // waits until the configured bucket holds 500 (400 tokens at 1000 a minute).
  CHECK(micros(*bucket.wait_for(500)) == 24'000'000);
  CHECK_FALSE(bucket.try_take(500));
  clock.advance(23'999'999us);
  CHECK_FALSE(bucket.try_take(500));
  clock.advance(1us);
  CHECK(bucket.try_take(500));
  CHECK(bucket.level() == -400.0);
}
