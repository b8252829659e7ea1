#include "fairlane/core/promise_watch.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <vector>

#include "core/fake_clock.hpp"
#include "fairlane/core/estimator.hpp"
#include "fairlane/core/fair_scheduler.hpp"
#include "fairlane/core/promise_order.hpp"

using namespace std::chrono_literals;
using fairlane::Estimator;
using fairlane::EstimatorConfig;
using fairlane::FairScheduler;
using fairlane::JobId;
using fairlane::PromiseWatch;
using fairlane::QueuedPage;
using fairlane::Revision;
using fairlane::RevisionReason;
using fairlane::UserId;
using fairlane::WallTime;
using fairlane::WatchedPromise;

namespace {

constexpr UserId kA = 1;
constexpr UserId kB = 2;
constexpr JobId kJob = 10;

// The lab's token limit alone binds: 300,000 TPM at 800 tokens a page is 6.25 pages/s, and
// a call takes 2 s. Without a budget or a clock the ETA is the steady formula, (pages ahead
// of the last + 1) / 6.25 + 2 s, and counts no arrivals.
constexpr fairlane::BudgetLimits kLimits{.tokens_per_minute = 300'000};

struct Fixture {
  explicit Fixture(fairlane::BudgetLimits limits = kLimits)
      : estimator{scheduler, EstimatorConfig{.limits = limits}} {}

  fairlane::FakeClock clock;
  fairlane::FakeWallClock wall{clock, WallTime{} + std::chrono::hours(24 * 365 * 50)};
  FairScheduler scheduler;
  Estimator estimator;
  fairlane::FairOrder order{scheduler};
  PromiseWatch watch;
  std::vector<JobId> ended_asked;
  bool has_ended = false;
  // Pages held back for a backoff: how long until each job's last returns to its lane.
  PromiseWatch::HeldBack held;
  int elapsed_s = 0;  // of run()
  int sent = 0;

  void add(UserId user, JobId job, int count) {
    for (int i = 1; i <= count; ++i) scheduler.add(QueuedPage{job * 1000 + i, job, user, 800});
  }

  // Watches `job` of `user`, promised what the estimator says now, as the door does.
  WallTime promise_as_quoted(UserId user, JobId job) {
    const double eta = estimator.job(user, job)->eta_seconds;
    const WallTime promised = wall.now() + std::chrono::duration_cast<WallTime::duration>(
                                               std::chrono::duration<double>(eta));
    watch.watch(user, job, wall.now(), promised, std::nullopt, estimator, wall.now());
    return promised;
  }

  // Alice's 60 pages promised as quoted; then a call settles, using `tokens` of `reserved`
  // in `latency`, and the watch looks a second later: its revisions.
  std::vector<Revision> promise_then_settle(std::int64_t tokens, std::int64_t reserved,
                                            fairlane::Clock::duration latency) {
    add(kA, kJob, 60);
    promise_as_quoted(kA, kJob);
    estimator.record_settled(tokens, reserved, latency);
    clock.advance(1s);
    return check();
  }

  std::vector<Revision> check(fairlane::Clock::duration paused_for = {}) {
    return watch.check(
        estimator, order, wall.now(), paused_for,
        [this](JobId job, const WatchedPromise&) {
          ended_asked.push_back(job);
          return has_ended;
        },
        held);
  }

  // Sends pages in fair order at the rate, 6.25 a second, and checks once a second for
  // `seconds`, telling every revision; returns them all.
  std::vector<Revision> run(int seconds) {
    std::vector<Revision> all;
    for (int s = 0; s < seconds; ++s) {
      clock.advance(1s);
      ++elapsed_s;
      while (sent < elapsed_s * 25 / 4 && scheduler.take()) ++sent;
      for (const Revision& revision : check()) {
        watch.announced(revision.job, revision.finish);
        all.push_back(revision);
      }
    }
    return all;
  }

  [[nodiscard]] double seconds_from_now(WallTime t) const {
    return std::chrono::duration<double>(t - wall.now()).count();
  }
};

}  // namespace

TEST_CASE("PromiseWatch: a promise still kept is not revised") {
  Fixture f;
  f.add(kA, kJob, 60);  // 60 / 6.25 + 2 = 11.6 s
  f.promise_as_quoted(kA, kJob);
  CHECK(f.run(5).empty());
  CHECK(f.watch.watched() == 1);
  CHECK(f.ended_asked.empty());
}

TEST_CASE("PromiseWatch: work arriving ahead past the slack revises the promise, once") {
  Fixture f;
  f.add(kA, kJob, 60);  // promised 11.6 s: the slack is 2 s
  const WallTime promised = f.promise_as_quoted(kA, kJob);
  // Bob's 10 pages go before Alice's last: 1.6 s later, within the slack.
  f.add(kB, 20, 10);
  CHECK(f.run(2).empty());
  // 11 more of Bob's, ahead of Alice's last page too: 3.5 s later than promised, past it.
  f.add(kB, 21, 11);
  const auto revised = f.run(1);
  REQUIRE(revised.size() == 1);
  CHECK(revised[0].job == kJob);
  CHECK(revised[0].reason == RevisionReason::more_work_ahead);
  // The projection is now + the ETA now.
  CHECK(f.seconds_from_now(revised[0].finish) ==
        doctest::Approx(f.estimator.job(kA, kJob)->eta_seconds));
  CHECK(std::chrono::duration<double>(revised[0].finish - promised).count() ==
        doctest::Approx(21.0 / 6.25).epsilon(0.05));
  // Told once: what it was told is kept, so the next looks find nothing new.
  CHECK(f.run(3).empty());
}

TEST_CASE("PromiseWatch: a pause of all dispatch is added and named first") {
  Fixture f;
  f.add(kA, kJob, 60);
  f.promise_as_quoted(kA, kJob);
  f.clock.advance(1s);
  // 1 s has passed: the projection is 1 s later than promised, and a 2.5 s pause takes it
  // past the 2 s slack.
  const auto revised = f.check(2500ms);
  REQUIRE(revised.size() == 1);
  CHECK(revised[0].reason == RevisionReason::dispatch_paused);
  CHECK(f.seconds_from_now(revised[0].finish) == doctest::Approx(11.6 + 2.5).epsilon(1e-6));
}

TEST_CASE("PromiseWatch: a page held back for a backoff is waited for, and named") {
  Fixture f;
  f.add(kA, kJob, 1);  // 1 / 6.25 + 2 = 2.16 s
  f.promise_as_quoted(kA, kJob);
  // Its call failed: it is held back 30 s, out of the lanes, for its next attempt. It ends
  // a call after its release, not a latency from now.
  (void)f.scheduler.take();
  f.held[kJob] = 30s;
  f.clock.advance(1s);
  auto revised = f.check();
  REQUIRE(revised.size() == 1);
  CHECK(revised[0].reason == RevisionReason::page_retrying);
  CHECK(f.seconds_from_now(revised[0].finish) == doctest::Approx(32.0));
  // Beside pages still queued, the later of the two counts: 9 pages end by 1.44 + 2 s, the
  // held one by 30 + 2 s. A page released sooner than the queue ends changes nothing.
  Fixture g;
  g.add(kA, kJob, 9);
  g.promise_as_quoted(kA, kJob);
  g.held[kJob] = 500ms;
  g.clock.advance(1s);
  CHECK(g.check().empty());
  g.held[kJob] = 30s;
  g.clock.advance(1s);
  revised = g.check();
  REQUIRE(revised.size() == 1);
  CHECK(revised[0].reason == RevisionReason::page_retrying);
  CHECK(g.seconds_from_now(revised[0].finish) == doctest::Approx(32.0));
}

TEST_CASE("PromiseWatch: a provider slower by a tenth since the promise is named") {
  // Tokens bind at 2 s a call (6.25 pages a second); 20 calls at once would allow 10.
  Fixture f{{.tokens_per_minute = 300'000, .max_in_flight = 20}};
  // Calls take 4 s: 20 at once allow 5 pages a second, and concurrency binds.
  const auto revised = f.promise_then_settle(800, 800, 4s);
  REQUIRE(revised.size() == 1);
  CHECK(revised[0].reason == RevisionReason::provider_slower);
  CHECK(revised[0].mu_then == doctest::Approx(6.25));
  CHECK(revised[0].mu_now == doctest::Approx(5.0));
}

TEST_CASE("PromiseWatch: pages dearer than expected are more work, not a slower provider") {
  Fixture f;
  // Pages use twice the tokens they reserve: the rate in pages halves, 3.125 a second, but
  // the provider allows as many tokens as before.
  const auto revised = f.promise_then_settle(1600, 800, 2s);
  REQUIRE(revised.size() == 1);
  CHECK(revised[0].reason == RevisionReason::more_work_ahead);
  CHECK(f.estimator.mu() == doctest::Approx(3.125));
  // At the pages' size when the promise was made, the provider's rate is unchanged.
  CHECK(revised[0].mu_now == doctest::Approx(revised[0].mu_then));
}

TEST_CASE("PromiseWatch: a job with nothing queued is asked about, and dropped once ended") {
  Fixture f;
  f.add(kA, kJob, 2);
  f.promise_as_quoted(kA, kJob);
  while (f.scheduler.take()) {
  }
  // Its pages are out: asked whether it ended, it has not, so it stays.
  CHECK(f.run(1).empty());
  CHECK(f.ended_asked == std::vector<JobId>{kJob});
  CHECK(f.watch.watched() == 1);
  // Asked again a second later; now it has ended.
  f.has_ended = true;
  CHECK(f.run(1).empty());
  CHECK(f.ended_asked == std::vector<JobId>{kJob, kJob});
  CHECK(f.watch.watched() == 0);
}

TEST_CASE("PromiseWatch: calls out answer by the last projection, not a whole latency from now") {
  Fixture f;
  f.estimator.record_settled(800, 800, 4s);  // calls take 4 s: longer than the 2 s slack
  f.add(kA, kJob, 10);
  const WallTime promised = f.promise_as_quoted(kA, kJob);  // 10 / 6.25 + 4 = 5.6 s
  // Sent at the rate, the last page leaves at 1.6 s and answers at 5.6 s. At 4 s its calls
  // have been out for 2 s: a latency from now (8 s) would be past the promise and its slack
  // (7.6 s), a false alarm.
  CHECK(f.run(4).empty());
  CHECK(f.scheduler.size() == 0);
  // Past the projection the calls are late: the guess is a latency from now, and it is said.
  const auto revised = f.run(3);
  REQUIRE(revised.size() == 1);
  CHECK(std::chrono::duration<double>(revised[0].finish - promised).count() ==
        doctest::Approx(6.0 + 4.0 - 5.6).epsilon(1e-6));  // at 6 s, the first look past it
}

TEST_CASE(
    "PromiseWatch: a far promise is looked at every tenth of its time left, a near one "
    "every second") {
  Fixture f;
  f.add(kA, kJob, 6250);  // 6,250 pages: 1,000 s, + 2 s
  f.promise_as_quoted(kA, kJob);
  const auto looks = [&f](int seconds) {
    int count = 0;
    for (int s = 0; s < seconds; ++s) {
      f.clock.advance(1s);
      // A pause larger than any slack makes every look a revision, so the looks are counted.
      const auto revised = f.check(std::chrono::hours(1));
      count += static_cast<int>(revised.size());
    }
    return count;
  };
  // First a second after it was watched; then a tenth of the 1,001 s left later, at 101.1 s.
  CHECK(looks(1) == 1);
  CHECK(looks(99) == 0);
  CHECK(looks(2) == 1);
  // Near its end: every second.
  Fixture g;
  g.add(kB, 20, 10);  // 10 / 6.25 + 2 = 3.6 s
  g.promise_as_quoted(kB, 20);
  int count = 0;
  for (int s = 0; s < 3; ++s) {
    g.clock.advance(1s);
    count += static_cast<int>(g.check(std::chrono::hours(1)).size());
  }
  CHECK(count == 3);
}

TEST_CASE("PromiseWatch: a job the PromiseOrder keeps is not revised for work only expected") {
  // An estimator that counts arrivals, over a minute's window.
  fairlane::FakeClock clock;
  fairlane::FakeWallClock wall{clock};
  FairScheduler scheduler;
  Estimator estimator{scheduler, EstimatorConfig{.limits = kLimits, .arrival_window = 60s}, nullptr,
                      &clock};
  fairlane::PromiseOrder kept_order{scheduler, estimator, clock};  // the service's order
  const fairlane::FairOrder fair_order{scheduler};                 // plain fair order
  for (int i = 1; i <= 600; ++i) kept_order.add(QueuedPage{kJob * 1000 + i, kJob, kA, 800});
  // Promised with no rate of arrivals yet: 600 / 6.25 + 2 = 98 s (the slack 9.8 s).
  const double eta = estimator.job(kA, kJob)->eta_seconds;
  REQUIRE(eta == doctest::Approx(98.0));
  const WallTime promised = wall.now() + std::chrono::seconds(98);
  kept_order.promise(kA, kJob, clock.now() + 98s);
  PromiseWatch kept;
  PromiseWatch plain;
  for (PromiseWatch* w : {&kept, &plain}) {
    w->watch(kA, kJob, wall.now(), promised, std::nullopt, estimator, wall.now());
  }
  // Newcomers' books of two pages arrive every second, and are answered elsewhere (they never
  // queue here): Alice's pages go at the full rate, and she ends on her promise. But the
  // rate of arrivals says that more will come ahead of her last page.
  const auto never_ended = [](JobId, const WatchedPromise&) { return false; };
  UserId newcomer = 100;
  int sent = 0;
  std::size_t kept_revisions = 0;
  std::size_t plain_revisions = 0;
  for (int s = 1; s <= 40; ++s) {
    estimator.record_arrival(++newcomer, 2);
    clock.advance(1s);
    for (; sent < s * 25 / 4 && kept_order.peek() != nullptr; ++sent) kept_order.take();
    kept_revisions += kept.check(estimator, kept_order, wall.now(), {}, never_ended, {}).size();
    plain_revisions += plain.check(estimator, fair_order, wall.now(), {}, never_ended, {}).size();
  }
  REQUIRE(estimator.competition(100.0) > 0.2);
  // In plain fair order that work would come ahead of her: told so.
  CHECK(plain_revisions >= 1);
  // Where promises are kept, it gives her its turns once her promise is at risk: nothing to
  // tell, and her projection is still her promise.
  CHECK(kept_revisions == 0);
  CHECK(kept_order.project(estimator, kA, kJob)->eta_seconds ==
        doctest::Approx(98.0 - 40.0).epsilon(0.01));
}

TEST_CASE("PromiseWatch: a job the PromiseOrder keeps is not revised for newer work queued") {
  // Alice's 100 pages are promised alone: 100 / 6.25 + 2 = 18 s (the slack 2 s). Two seconds
  // in, Bob queues 100 pages. Shared with him, her last page would be answered 30 s in; but
  // her promise falls at risk and his turns are hers: she ends on it, and is told nothing.
  Fixture f;
  fairlane::PromiseOrder order{f.scheduler, f.estimator, f.clock};
  for (int i = 1; i <= 100; ++i) order.add(QueuedPage{kJob * 1000 + i, kJob, kA, 800});
  const WallTime promised = f.wall.now() + 18s;
  order.promise(kA, kJob, f.clock.now() + 18s);
  f.watch.watch(kA, kJob, f.wall.now(), promised, std::nullopt, f.estimator, f.wall.now());
  PromiseWatch plain;  // what a watch of fair order's projection would say
  plain.watch(kA, kJob, f.wall.now(), promised, std::nullopt, f.estimator, f.wall.now());
  const auto never_ended = [](JobId, const WatchedPromise&) { return false; };
  std::size_t kept_revisions = 0;
  std::size_t plain_revisions = 0;
  int sent = 0;
  int alice_sent = 0;
  int alice_last_s = 0;
  // Until her last page is sent (then her job ends, once answered).
  for (int s = 1; s <= 40 && alice_sent < 100; ++s) {
    if (s == 2) {
      for (int i = 1; i <= 100; ++i) order.add(QueuedPage{20'000 + i, 20, kB, 800});
    }
    f.clock.advance(1s);
    for (; sent < s * 25 / 4 && order.peek() != nullptr; ++sent) {
      if (order.take().job_id != kJob) continue;
      ++alice_sent;
      alice_last_s = s;
    }
    kept_revisions += f.watch.check(f.estimator, order, f.wall.now(), {}, never_ended, {}).size();
    plain_revisions += plain.check(f.estimator, f.order, f.wall.now(), {}, never_ended, {}).size();
  }
  CHECK(alice_last_s <= 16);  // sent by 16 s, answered by 18 s: her promise
  CHECK(order.out_of_turn() > 0);
  CHECK(plain_revisions >= 1);
  CHECK(kept_revisions == 0);
}

TEST_CASE("A job ends after a pause, and no sooner than a call after its held pages return") {
  using fairlane::seconds_to_finish;
  // Queued pages go once the pause is over.
  CHECK(seconds_to_finish(10.0, 120.0, std::nullopt, 2.0) == doctest::Approx(130.0));
  CHECK(seconds_to_finish(10.0, 0.0, std::nullopt, 2.0) == doctest::Approx(10.0));
  // A page held back answers a call after it returns, or after the pause if that is later.
  CHECK(seconds_to_finish(std::nullopt, 0.0, 40.0, 2.0) == doctest::Approx(42.0));
  CHECK(seconds_to_finish(std::nullopt, 60.0, 40.0, 2.0) == doctest::Approx(62.0));
  CHECK(seconds_to_finish(5.0, 0.0, 40.0, 2.0) == doctest::Approx(42.0));
  CHECK(seconds_to_finish(50.0, 0.0, 40.0, 2.0) == doctest::Approx(50.0));
  // Nothing queued or held: all its pages are out, or it has ended.
  CHECK_FALSE(seconds_to_finish(std::nullopt, 30.0, std::nullopt, 2.0).has_value());
}
