#include <doctest/doctest.h>

#include <chrono>
#include <functional>

#include "core/fake_clock.hpp"
#include "fairlane/core/arrivals.hpp"

using namespace std::chrono_literals;
using fairlane::Arrivals;
using fairlane::FakeClock;

namespace {

// A minute's window in ten slots of 6 s, long after start.
struct Settled {
  FakeClock clock;
  Arrivals arrivals{clock, 60s};
  Settled() { clock.advance(1h); }

  // Runs `arrive` in each of the next ten slots, then lets the last one end.
  void every_slot(const std::function<void(int)>& arrive) {
    for (int slot = 0; slot < 10; ++slot) {
      arrive(slot);
      clock.advance(6s);
    }
  }
};

}  // namespace

TEST_CASE("A newcomer's small book counts whole, weighed by how far ahead it lands") {
  Settled s;
  // A book of 10 pages over rounds [0, 10] in every slot. For a job whose last page is 20
  // rounds out a page at round p weighs 1 - p / 20: the mean round is 5, so a book weighs
  // 10 x 0.75 = 7.5 pages; 7.5 pages every 6 s is 1.25 a second.
  s.every_slot([&](int) { s.arrivals.record(0.0, 10.0, 10.0); });
  CHECK(s.arrivals.competing_rate(20.0) == doctest::Approx(7.5 / 6.0));
  // For a job 10 rounds out, the pages from round 8 to 10 lie in the bucket [8, 16) that
  // holds K: a book weighs 10 x (1 - 5 / 10) = 5 pages exactly.
  CHECK(s.arrivals.competing_rate(10.0) == doctest::Approx(5.0 / 6.0));
}

TEST_CASE("Of a heavy user's books only what lands ahead of the job counts") {
  Settled s;
  // 1,000 pages over rounds [0, 1000] every slot: for K = 20, the 20 pages below it, at a
  // mean round of 10, weigh 20 x 0.5 = 10; the 980 behind weigh nothing.
  s.every_slot([&](int) { s.arrivals.record(0.0, 1000.0, 1000.0); });
  CHECK(s.arrivals.competing_rate(20.0) == doctest::Approx(10.0 / 6.0));
  // A job far out sees all of them: 1000 x (1 - 500 / 1e6) a slot.
  CHECK(s.arrivals.competing_rate(1e6) == doctest::Approx(1000.0 * (1.0 - 500.0 / 1e6) / 6.0));
  // Work that lands behind the job (a backlogged lane's next book) counts nothing.
  Settled behind;
  behind.every_slot([&](int) { behind.arrivals.record(500.0, 600.0, 100.0); });
  CHECK(behind.arrivals.competing_rate(400.0) == 0.0);
}

TEST_CASE("One burst is not a rate: the slot with the most is left out") {
  Settled steady;
  Settled burst;
  steady.every_slot([&](int) { steady.arrivals.record(0.0, 0.0, 6.0); });
  burst.every_slot([&](int slot) {
    burst.arrivals.record(0.0, 0.0, 6.0);
    if (slot == 4) burst.arrivals.record(0.0, 300.0, 300.0);  // a shelf of books at once
  });
  CHECK(steady.arrivals.competing_rate(100.0) == doctest::Approx(1.0));
  CHECK(burst.arrivals.competing_rate(100.0) == doctest::Approx(1.0));
}

TEST_CASE("Over few slots the busiest counts as the next busiest: the burst goes, the books stay") {
  FakeClock clock;
  Arrivals left_out(clock, 60s, 0, fairlane::Busiest::left_out);
  Arrivals as_next(clock, 60s, 0, fairlane::Busiest::as_next);
  // A fresh start: a shelf of 300 pages at once, then 6 pages, then 12 (each at round 0, so
  // each page weighs 1 for any job): three slots of 6 s end.
  for (const double pages : {300.0, 6.0, 12.0}) {
    for (Arrivals* a : {&left_out, &as_next}) a->record(0.0, 0.0, pages);
    clock.advance(6s);
  }
  // The shelf left out: 18 pages in 12 s. Counted as the next busiest: 30 pages in 18 s, the
  // shelf worth the 12-page slot, where leaving it out costs the rate a third of its books.
  CHECK(left_out.competing_rate(100.0) == doctest::Approx(18.0 / 12.0));
  CHECK(as_next.competing_rate(100.0) == doctest::Approx(30.0 / 18.0));
  // Where every slot holds the same, the two agree: 6 pages a slot, a page a second.
  FakeClock steady_clock;
  Arrivals steady_left_out(steady_clock, 60s, 0, fairlane::Busiest::left_out);
  Arrivals steady_as_next(steady_clock, 60s, 0, fairlane::Busiest::as_next);
  for (int slot = 0; slot < 5; ++slot) {
    for (Arrivals* a : {&steady_left_out, &steady_as_next}) a->record(0.0, 0.0, 6.0);
    steady_clock.advance(6s);
  }
  CHECK(steady_left_out.competing_rate(100.0) == doctest::Approx(1.0));
  CHECK(steady_as_next.competing_rate(100.0) == doctest::Approx(1.0));
}

TEST_CASE("Only ended slots of the window count: the current one is still in the queue") {
  Settled s;
  s.every_slot([&](int) { s.arrivals.record(0.0, 0.0, 6.0); });
  const double rate = s.arrivals.competing_rate(100.0);
  s.arrivals.record(0.0, 0.0, 600.0);  // arrives now: queued, counted there
  CHECK(s.arrivals.competing_rate(100.0) == doctest::Approx(rate));
  // A window with nothing in it later: nothing competes.
  s.clock.advance(66s);
  CHECK(s.arrivals.competing_rate(100.0) == 0.0);
  CHECK(s.arrivals.competing_rate(0.0) == 0.0);
}

TEST_CASE("Until three slots have ended there is no rate to speak of: of two, one is a burst") {
  FakeClock clock;
  Arrivals arrivals(clock, 60s);
  // A fresh start: a user's shelf of 300 pages at once, then a book of 6 pages a slot.
  arrivals.record(0.0, 300.0, 300.0);
  arrivals.record(0.0, 0.0, 6.0);
  clock.advance(6s);
  arrivals.record(0.0, 0.0, 6.0);
  CHECK_FALSE(arrivals.measuring());
  CHECK(arrivals.competing_rate(100.0) == 0.0);  // one slot ended
  clock.advance(6s);
  // Two ended: the shelf would be taken for a rate of 25 pages a second.
  CHECK_FALSE(arrivals.measuring());
  CHECK(arrivals.competing_rate(100.0) == 0.0);
  arrivals.record(0.0, 0.0, 6.0);
  clock.advance(6s);
  // Three: the busiest (the shelf's) is left out, the other two are a page a second.
  CHECK(arrivals.measuring());
  CHECK(arrivals.competing_rate(100.0) == doctest::Approx(1.0));
}
