#include <doctest/doctest.h>

#include <chrono>

#include "core/fake_clock.hpp"
#include "fairlane/core/promise_window.hpp"

using namespace std::chrono_literals;
using fairlane::FakeClock;
using fairlane::PromiseWindow;

TEST_CASE("A job alone in its window is promised what the door said") {
  FakeClock clock;
  PromiseWindow window(clock, 250ms);
  const auto start = clock.now();
  window.accepted(7, 30s);
  CHECK(window.next_close() == start + 250ms);
  CHECK_FALSE(window.take_closed().has_value());  // still open
  clock.advance(250ms);
  const auto closed = window.take_closed();
  REQUIRE(closed.has_value());
  CHECK(closed->job == 7);
  CHECK(closed->door_promise == start + 30s);
  CHECK_FALSE(closed->others_came);
  // Whatever the estimate says now, the door's promise stands.
  CHECK(PromiseWindow::promise(*closed, clock.now(), 90s) == start + 30s);
  CHECK(window.open() == 0);
  CHECK_FALSE(window.next_close().has_value());
}

TEST_CASE("Jobs accepted together are promised from the lanes that hold them all") {
  FakeClock clock;
  PromiseWindow window(clock, 250ms);
  const auto start = clock.now();
  window.accepted(1, 20s);  // the first of a step: quoted the empty provider
  clock.advance(10ms);
  window.accepted(2, 40s);
  clock.advance(10ms);
  window.accepted(3, 60s);
  clock.advance(300ms);

  const auto first = window.take_closed();
  REQUIRE(first.has_value());
  CHECK(first->job == 1);
  CHECK(first->others_came);
  // Sharing with the other two, it ends with them: later than the door said.
  CHECK(PromiseWindow::promise(*first, clock.now(), 60s) == clock.now() + 60s);
  // Never earlier than the door's estimate, and the door's when nothing is left to queue.
  CHECK(PromiseWindow::promise(*first, clock.now(), 5s) == start + 20s);
  CHECK(PromiseWindow::promise(*first, clock.now(), std::nullopt) == start + 20s);

  const auto second = window.take_closed();
  REQUIRE(second.has_value());
  CHECK(second->job == 2);
  CHECK(second->others_came);  // the third came in its window
  const auto third = window.take_closed();
  REQUIRE(third.has_value());
  CHECK(third->job == 3);
  CHECK_FALSE(third->others_came);  // the last: everyone it shares with was there before
  CHECK_FALSE(window.take_closed().has_value());
}

TEST_CASE("A job accepted after a window closed is not counted in it") {
  FakeClock clock;
  PromiseWindow window(clock, 250ms);
  window.accepted(1, 10s);
  clock.advance(250ms);
  const auto closed = window.take_closed();
  REQUIRE(closed.has_value());
  window.accepted(2, 10s);
  CHECK_FALSE(closed->others_came);
  clock.advance(1s);
  const auto next = window.take_closed();
  REQUIRE(next.has_value());
  CHECK(next->job == 2);
  CHECK_FALSE(next->others_came);
}

TEST_CASE("A window of zero closes at once, with nothing in it") {
  FakeClock clock;
  PromiseWindow window(clock, 0s);
  window.accepted(1, 10s);
  const auto closed = window.take_closed();
  REQUIRE(closed.has_value());
  CHECK_FALSE(closed->others_came);
  CHECK(PromiseWindow::promise(*closed, clock.now(), 60s) == clock.now() + 10s);
  PromiseWindow negative(clock, -5s);  // taken as zero
  CHECK(negative.window() == 0s);
}

TEST_CASE("A job promised at once still counts in the windows open when it came") {
  FakeClock clock;
  PromiseWindow window(clock, 250ms);
  window.accepted(1, 10s);
  clock.advance(5ms);
  window.accepted_at_once();  // the last of a burst: nothing came with it
  CHECK(window.open() == 1);
  clock.advance(250ms);
  const auto closed = window.take_closed();
  REQUIRE(closed.has_value());
  CHECK(closed->others_came);
  CHECK_FALSE(window.take_closed().has_value());
}
