#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <stdexcept>
#include <variant>
#include <vector>

#include "core/fake_clock.hpp"
#include "fairlane/core/budget.hpp"
#include "fairlane/core/estimator.hpp"
#include "fairlane/core/fair_scheduler.hpp"

using namespace std::chrono_literals;
using fairlane::BudgetLimits;
using fairlane::Estimator;
using fairlane::EstimatorConfig;
using fairlane::FairScheduler;
using fairlane::Limit;
using fairlane::QueuedPage;

namespace {

// The lab's limits: 1,500 RPM, 300,000 TPM, 200 in flight; 800 tokens and 2 s a page.
constexpr BudgetLimits kLab{
    .requests_per_minute = 1'500, .tokens_per_minute = 300'000, .max_in_flight = 200};

void add_pages(FairScheduler& scheduler, fairlane::UserId user, fairlane::JobId job, int count) {
  for (int i = 1; i <= count; ++i) scheduler.add(QueuedPage{job * 1000 + i, job, user, 800});
}

// A book of 100 pages that reserve 6,400 tokens each and, as one settled call has taught an
// estimator of alpha 1, use 800 and take 2 s: reservations 8 times usage, at the lab's
// limits, the buckets full.
struct EightTimesUsage {
  fairlane::FakeClock clock;
  fairlane::Budget budget{clock, kLab};
  FairScheduler scheduler;
  Estimator estimator{scheduler, EstimatorConfig{.limits = kLab, .ewma_alpha = 1.0}, &budget};

  EightTimesUsage() {
    for (int i = 1; i <= 100; ++i) scheduler.add(QueuedPage{10'000 + i, 10, 1, 6'400});
    estimator.record_settled(800, 6'400, 2s);
  }
};

// Adds `pages` and takes them all in fair order, each settled at `used(page)` tokens in 2 s,
// in the scheduler and in each estimator: the lanes and the averages learn what pages use.
void learn(FairScheduler& scheduler, std::initializer_list<Estimator*> estimators,
           std::initializer_list<QueuedPage> pages,
           const std::function<std::int64_t(const QueuedPage&)>& used) {
  for (const QueuedPage& page : pages) scheduler.add(page);
  while (const auto page = scheduler.take()) {
    scheduler.settle(*page, used(*page));
    for (Estimator* estimator : estimators) estimator->record_settled(used(*page), page->cost, 2s);
  }
}

}  // namespace

TEST_CASE("mu is the smallest of the three rates, and names the binding limit") {
  FairScheduler scheduler;
  // requests 1500/60 = 25/s; tokens 300000/60/800 = 6.25/s; concurrency 200/2 = 100/s.
  Estimator lab(scheduler, EstimatorConfig{.limits = kLab});
  CHECK(lab.mu() == doctest::Approx(6.25));
  CHECK(lab.binding() == Limit::tokens);

  // RPM 60: 1/s is below 6.25/s.
  Estimator requests(scheduler, EstimatorConfig{.limits = {.requests_per_minute = 60,
                                                           .tokens_per_minute = 300'000,
                                                           .max_in_flight = 200}});
  CHECK(requests.mu() == doctest::Approx(1.0));
  CHECK(requests.binding() == Limit::requests);

  // 5 in flight at 2 s a call: 2.5/s.
  Estimator concurrency(scheduler, EstimatorConfig{.limits = {.requests_per_minute = 1'500,
                                                              .tokens_per_minute = 300'000,
                                                              .max_in_flight = 5}});
  CHECK(concurrency.mu() == doctest::Approx(2.5));
  CHECK(concurrency.binding() == Limit::concurrency);

  Estimator unlimited(scheduler, EstimatorConfig{});
  CHECK(std::isinf(unlimited.mu()));
}

TEST_CASE("Averages start from the configuration, and the settled calls replace it") {
  FairScheduler scheduler;
  Estimator estimator(scheduler, EstimatorConfig{.limits = kLab, .ewma_alpha = 0.1});
  CHECK(estimator.avg_tokens_per_page() == 800.0);
  CHECK(estimator.avg_latency_s() == 2.0);
  estimator.record_settled(1'200, 3'000, 4s);
  CHECK(estimator.avg_tokens_per_page() == doctest::Approx(1'200.0));
  CHECK(estimator.avg_reserved_tokens_per_page() == doctest::Approx(3'000.0));
  CHECK(estimator.avg_latency_s() == doctest::Approx(4.0));
  // tokens: 5000 / 1200 = 4.17 pages/s.
  CHECK(estimator.mu() == doctest::Approx(5000.0 / 1'200.0));
  // The second weighs a half: the mean of the two.
  estimator.record_settled(800, 1'000, 2s);
  CHECK(estimator.avg_tokens_per_page() == doctest::Approx(1'000.0));
  CHECK(estimator.avg_reserved_tokens_per_page() == doctest::Approx(2'000.0));
  CHECK(estimator.avg_latency_s() == doctest::Approx(3.0));
}

TEST_CASE("A job waits for the slowest of its last calls: latencies that vary add their spread") {
  FairScheduler scheduler;
  Estimator fixed(scheduler, EstimatorConfig{.limits = kLab});
  Estimator varying(scheduler, EstimatorConfig{.limits = kLab});
  for (int i = 0; i < 2'000; ++i) {
    fixed.record_settled(800, 800, 2s);
    varying.record_settled(800, 800, i % 2 == 0 ? 1s : 3s);
  }
  REQUIRE(varying.avg_latency_s() == doctest::Approx(2.0).epsilon(0.02));
  // 100 pages go over 100 / 6.25 = 16 s, 0.16 s apart. The slowest of the last k calls is
  // allowed 2 + sqrt(2 ln (100 k)) s (mean 2 s, deviation 1 s; the expected largest of
  // 100 k draws, finish_quantile 0.99) after the first of them, which went (k - 1) x 0.16 s
  // before the last: most at k = 2, sqrt(2 ln 200) - 0.16 = 3.10 s past a call's average.
  CHECK(fixed.estimate_new(1, 100).eta_seconds == doctest::Approx(18.0));
  CHECK(varying.estimate_new(1, 100).eta_seconds ==
        doctest::Approx(18.0 + std::sqrt(2.0 * std::log(200.0)) - 0.16).epsilon(0.02));
  // One page has no slower companion: its own call, with the margin of 100 draws.
  CHECK(varying.estimate_new(1, 1).eta_seconds ==
        doctest::Approx(fixed.estimate_new(1, 1).eta_seconds + std::sqrt(2.0 * std::log(100.0)))
            .epsilon(0.02));
}

namespace {

// Ten times the lab's limits: 62.5 pages a second, a page every 0.016 s.
constexpr BudgetLimits kTenLabs{
    .requests_per_minute = 15'000, .tokens_per_minute = 3'000'000, .max_in_flight = 200};

// Calls of 1 s and 3 s in turn: mean 2 s, deviation 1 s exactly.
void settle_one_and_three_seconds(Estimator& estimator) {
  for (int i = 0; i < 50; ++i) estimator.record_settled(800, 800, i % 2 == 0 ? 1s : 3s);
}

// The slowest of a job's last calls past a call's average, by hand: the most over every
// count k of them, 1 to `calls` (those within a latency of the last), of the expected
// largest of 100 k draws (deviation 1 s) less the k - 1 gaps they went sooner.
double slowest_by_hand(int calls, double gap) {
  double most = 0.0;
  for (int k = 1; k <= calls; ++k) {
    most = std::max(most, std::sqrt(2.0 * std::log(100.0 * k)) - (k - 1) * gap);
  }
  return most;
}

}  // namespace

TEST_CASE("The slowest of a job's last calls: the most over every count of them") {
  FairScheduler scheduler;
  Estimator estimator(scheduler, EstimatorConfig{.limits = kTenLabs});
  settle_one_and_three_seconds(estimator);
  // 100 pages 0.016 s apart over 1.6 s, all 100 within a latency of the last.
  CHECK(estimator.estimate_new(1, 100).eta_seconds ==
        doctest::Approx(1.6 + 2.0 + slowest_by_hand(100, 0.016)));
}

TEST_CASE("A job behind its user's own earlier job: its calls go out at the lane's pace") {
  FairScheduler scheduler;
  Estimator estimator(scheduler, EstimatorConfig{.limits = kTenLabs});
  settle_one_and_three_seconds(estimator);
  add_pages(scheduler, 1, 1, 100);
  // The new job's 100 pages are the lane's 101st to 200th: all 200 go out over 3.2 s, one
  // every 0.016 s, so its own go 0.016 s apart too (not 3.2 s / 100 = 0.032 s, as if they
  // alone took the whole wait), and the calls out with its last are the 100 sent within a
  // latency of it.
  CHECK(estimator.estimate_new(1, 100).eta_seconds ==
        doctest::Approx(3.2 + 2.0 + slowest_by_hand(100, 0.016)));
}

TEST_CASE("A page that alone reserves more than a minute's tokens waits for its own call") {
  FairScheduler scheduler;
  Estimator estimator(scheduler, EstimatorConfig{.limits = kLab});
  // Pages reserve 600,000 tokens, twice the 300,000 a minute: not even one is out with
  // another. They use 800 (6.25 pages a second); calls of 1 s and 3 s, mean 2, deviation 1.
  for (int i = 0; i < 50; ++i) {
    estimator.record_settled(800, 600'000, i % 2 == 0 ? 1s : 3s);
  }
  // 0.16 s to send, then its call with the margin of 100 draws, and no more.
  CHECK(estimator.estimate_new(1, 1).eta_seconds ==
        doctest::Approx(0.16 + 2.0 + std::sqrt(2.0 * std::log(100.0))));
}

TEST_CASE("A finish quantile below one half or at one or more is refused") {
  FairScheduler scheduler;
  CHECK_THROWS_AS(Estimator(scheduler, EstimatorConfig{.finish_quantile = 1.0}),
                  std::invalid_argument);
  CHECK_THROWS_AS(Estimator(scheduler, EstimatorConfig{.finish_quantile = 0.2}),
                  std::invalid_argument);
  CHECK_NOTHROW(Estimator(scheduler, EstimatorConfig{.finish_quantile = 0.9}));
}

TEST_CASE("Calls that go out together wait for the slowest of them all") {
  fairlane::FakeClock clock;
  fairlane::Budget budget(clock, kLab);
  FairScheduler scheduler;
  Estimator estimator(scheduler, EstimatorConfig{.limits = kLab}, &budget);
  for (int i = 0; i < 2'000; ++i) estimator.record_settled(800, 800, i % 2 == 0 ? 1s : 3s);
  // A full tokens bucket (300,000) and 200 permits send 100 pages of 800 tokens at once:
  // no gap between them, and the largest of 100 draws with the margin (q = 0.99), the
  // expected largest of 100 / 0.01 draws: sqrt(2 ln (100 x 100)) deviations.
  CHECK(estimator.estimate_new(1, 100).eta_seconds ==
        doctest::Approx(2.0 + std::sqrt(2.0 * std::log(10'000.0))).epsilon(0.02));
}

TEST_CASE("The calls settled give the averages their own, the configured guesses none") {
  FairScheduler scheduler;
  const EstimatorConfig config{.limits = kLab};
  // The first replaces the configured guesses (800 tokens, 2 s) ...
  Estimator estimator(scheduler, config);
  estimator.record_settled(1'200, 3'000, 4s);
  CHECK(estimator.avg_tokens_per_page() == doctest::Approx(1'200.0));
  CHECK(estimator.avg_reserved_tokens_per_page() == doctest::Approx(3'000.0));
  CHECK(estimator.avg_latency_s() == doctest::Approx(4.0));
  // ... and those after it are averaged with it, their spread their own: calls of 1 s and
  // 3 s in turn, fifty of them (one latency alpha's worth), average 2 s, deviation 1 s.
  Estimator varying(scheduler, config);
  for (int i = 0; i < 50; ++i) varying.record_settled(800, 800, i % 2 == 0 ? 1s : 3s);
  CHECK(varying.avg_latency_s() == doctest::Approx(2.0));
  CHECK(varying.estimate_new(1, 100).eta_seconds ==
        doctest::Approx(18.0 + std::sqrt(2.0 * std::log(200.0)) - 0.16).epsilon(0.001));
  // Calls ten times faster than the configured guess, all alike, at ten times the lab's
  // limits (62.5 pages a second): no spread, 100 pages in 1.6 s and a call's 0.2 s. Were the
  // guess their first average, the estimator would still be on its way down from 2 s after
  // 64 calls (a fresh service's warm-up book), and every deviation on the way counted as
  // spread, which the slowest of the last calls adds to every promise: a book of 2 pages
  // promised 3.3 s took 0.23 s (e2e.serve_promises, 2026-12-05).
  const EstimatorConfig fast{.limits = {.requests_per_minute = 15'000,
                                        .tokens_per_minute = 3'000'000,
                                        .max_in_flight = 200}};
  Estimator fresh(scheduler, fast);
  for (int i = 0; i < 64; ++i) fresh.record_settled(800, 800, 200ms);
  CHECK(fresh.avg_latency_s() == doctest::Approx(0.2));
  CHECK(fresh.estimate_new(1, 100).eta_seconds == doctest::Approx(1.8));
}

TEST_CASE("Past one alpha's worth of calls the averages forget the oldest") {
  FairScheduler scheduler;
  Estimator estimator(scheduler, EstimatorConfig{.limits = kLab});
  // Fifty calls (1 / latency alpha) of 1 s are their plain mean; the next weighs alpha.
  for (int i = 0; i < 50; ++i) estimator.record_settled(800, 800, 1s);
  CHECK(estimator.avg_latency_s() == doctest::Approx(1.0));
  estimator.record_settled(800, 800, 3s);
  CHECK(estimator.avg_latency_s() == doctest::Approx(1.0 + 0.02 * 2.0));
  // The tokens' alpha (0.1) took over after ten calls: the 51st weighs 0.1.
  estimator.record_settled(1'800, 800, 1s);
  CHECK(estimator.avg_tokens_per_page() == doctest::Approx(900.0));
}

TEST_CASE("Position and ETA of a queued job, worked by hand") {
  FairScheduler scheduler;
  add_pages(scheduler, 1, 10, 10);  // A: job 10, 10 pages
  add_pages(scheduler, 2, 20, 3);   // B: 3 pages
  add_pages(scheduler, 3, 30, 20);  // C: 20 pages
  Estimator estimator(scheduler, EstimatorConfig{.limits = kLab});

  // A's job: next page j = 1, last k = 10.
  //   position = min(3, 1) + min(20, 1) + (1 - 1) = 2
  //   ahead of last = min(3, 10) + min(20, 10) + (10 - 1) = 22
  //   eta = (22 + 1) / 6.25 + 2 = 5.68 s
  const auto a = estimator.job(1, 10);
  REQUIRE(a);
  CHECK(a->position == 2);
  CHECK(a->eta_seconds == doctest::Approx(5.68));

  // B's job: j = 1, k = 3: position = 1 + 1 = 2; ahead = 3 + 3 + 2 = 8; eta = 9 / 6.25 + 2.
  const auto b = estimator.job(2, 20);
  REQUIRE(b);
  CHECK(b->position == 2);
  CHECK(b->eta_seconds == doctest::Approx(3.44));

  CHECK_FALSE(estimator.job(1, 99).has_value());
}

TEST_CASE("A new job's estimate counts what is queued ahead of it, worked by hand") {
  FairScheduler scheduler;
  add_pages(scheduler, 1, 10, 10);
  add_pages(scheduler, 2, 20, 3);
  add_pages(scheduler, 3, 30, 20);
  Estimator estimator(scheduler, EstimatorConfig{.limits = kLab});

  // B adds 5 pages behind its 3: j = 4, k = 8.
  //   position = min(10, 4) + min(20, 4) + 3 = 11
  //   ahead of last = min(10, 8) + min(20, 8) + 7 = 23; eta = 24 / 6.25 + 2 = 5.84 s
  const auto b = estimator.estimate_new(2, 5);
  CHECK(b.position == 11);
  CHECK(b.eta_seconds == doctest::Approx(5.84));

  // A new user D with 1 page: j = k = 1: position = 1 + 1 + 1 = 3; eta = 4 / 6.25 + 2.
  const auto d = estimator.estimate_new(4, 1);
  CHECK(d.position == 3);
  CHECK(d.eta_seconds == doctest::Approx(2.64));
}

TEST_CASE("Weights scale what other lanes send ahead: min(q_v, k * w_v / w_u)") {
  FairScheduler scheduler;
  add_pages(scheduler, 1, 10, 10);  // A, weight 1
  add_pages(scheduler, 2, 20, 3);   // B, weight 1
  add_pages(scheduler, 3, 30, 20);  // C, weight 2
  scheduler.set_weight(3, 2);
  Estimator estimator(scheduler, EstimatorConfig{.limits = kLab});
  // A's last page k = 10: B sends min(3, 10) = 3, C sends min(20, 10 x 2 / 1) = 20.
  //   ahead = 3 + 20 + 9 = 32; eta = 33 / 6.25 + 2 = 7.28 s
  CHECK(estimator.job(1, 10)->eta_seconds == doctest::Approx(7.28));
  // C's last page k = 20: A sends min(10, 20 x 1 / 2) = 10, B min(3, 10) = 3.
  //   ahead = 13 + 19 = 32 as well.
  CHECK(estimator.job(3, 30)->eta_seconds == doctest::Approx(7.28));
}

TEST_CASE("With nothing limited, a job waits only for its call") {
  FairScheduler scheduler;
  add_pages(scheduler, 1, 10, 50);
  Estimator estimator(scheduler, EstimatorConfig{.initial_latency_s = 1.5});
  CHECK(estimator.job(1, 10)->eta_seconds == doctest::Approx(1.5));
}

TEST_CASE("With the budget, what the buckets hold now goes first at the in-flight rate") {
  fairlane::FakeClock clock;
  fairlane::Budget budget(clock, kLab);
  FairScheduler scheduler;
  add_pages(scheduler, 1, 10, 500);
  Estimator estimator(scheduler, EstimatorConfig{.limits = kLab}, &budget);
  // Full buckets: B = min(1500 requests, 300000 / 800 = 375 pages) = 375; F = 200 free
  // permits; c = 200 / 2 s = 100 pages/s. n = 500: the credit and its refill allow the
  // 500th page at (500 - 375) / 6.25 = 20 s, the calls at (500 - 200) / 100 = 3 s:
  //   max(20, 3) + 2 = 22 s (the refill goes on while the credit is spent)
  CHECK(estimator.job(1, 10)->eta_seconds == doctest::Approx(22.0));
  // A 100-page job alone would start at once: 0 + 0 + 2 s.
  FairScheduler alone;
  Estimator fresh(alone, EstimatorConfig{.limits = kLab}, &budget);
  CHECK(fresh.estimate_new(1, 100).eta_seconds == doctest::Approx(2.0));

  // Empty buckets give exactly the steady-state formula: 500 / 6.25 + 2 = 82 s.
  std::get<fairlane::Lease>(budget.admit(300'000)).settle(300'000);
  CHECK(estimator.job(1, 10)->eta_seconds == doctest::Approx(82.0));
}

TEST_CASE("Pages beyond the free permits wait for the calls out to end, then flow") {
  // Only the 200 in flight bind: 200 / 2 s = 100 pages/s once calls flow.
  constexpr BudgetLimits kCalls{.max_in_flight = 200};
  fairlane::FakeClock clock;
  fairlane::Budget budget(clock, kCalls);
  FairScheduler scheduler;
  add_pages(scheduler, 1, 10, 300);
  Estimator estimator(scheduler, EstimatorConfig{.limits = kCalls}, &budget);
  // Nothing out: 200 go at once and end 2 s from now; the other 100 go then, at 100 a
  // second: 2 + 1 s, and 2 s for the last call. (Counting them at 100 a second from now,
  // as if calls were already ending, said 1 + 2 = 3 s.)
  CHECK(estimator.job(1, 10)->eta_seconds == doctest::Approx(5.0));
  // 150 calls out: 50 pages go at once, and the next 150 as those calls end; 100 more then
  // wait for the 50 sent now (2 s) and go at 100 a second.
  std::vector<fairlane::Lease> out;
  for (int i = 0; i < 150; ++i) out.push_back(std::get<fairlane::Lease>(budget.admit(800)));
  CHECK(estimator.job(1, 10)->eta_seconds == doctest::Approx(2.0 + 100.0 / 100.0 + 2.0));
  // 100 pages: 50 at once, and 50 as the first of the 150 end. Sent together just now, the
  // 150 end together 2 s from now, so the 50 go then; 2 s the call.
  FairScheduler small;
  add_pages(small, 1, 10, 100);
  Estimator of_small(small, EstimatorConfig{.limits = kCalls}, &budget);
  CHECK(of_small.job(1, 10)->eta_seconds == doctest::Approx(2.0 + 2.0));
  // Half a second later they are taken as sent over the last second (twice their mean age),
  // so they end over the second before 2 s after now: the 50th of 150 at 1 + 50 / 150 s.
  clock.advance(500ms);
  CHECK(of_small.job(1, 10)->eta_seconds == doctest::Approx(1.0 + 50.0 / 150.0 + 2.0));
  // Calls sent steadily, 15 every 0.2 s, the last just now: a mean age of 0.9 s, so taken
  // as sent over the last 1.8 s, they end over the last 1.8 s of the next 2 s, as they do.
  fairlane::Budget steady(clock, kCalls);
  Estimator of_steady(small, EstimatorConfig{.limits = kCalls}, &steady);
  std::vector<fairlane::Lease> sent;
  for (int step = 0; step < 10; ++step) {
    clock.advance(200ms);
    for (int i = 0; i < 15; ++i) sent.push_back(std::get<fairlane::Lease>(steady.admit(800)));
  }
  CHECK(of_steady.job(1, 10)->eta_seconds == doctest::Approx(0.2 + 50.0 * 1.8 / 150.0 + 2.0));
}

TEST_CASE("A bucket in debt is waited off before anything goes: the ETA counts it") {
  fairlane::FakeClock clock;
  fairlane::Budget budget(clock, kLab);
  FairScheduler scheduler;
  add_pages(scheduler, 1, 10, 500);
  Estimator estimator(scheduler, EstimatorConfig{.limits = kLab}, &budget);
  // Empty: 500 / 6.25 + 2 = 82 s, as above.
  std::get<fairlane::Lease>(budget.admit(300'000)).settle(300'000);
  CHECK(estimator.job(1, 10)->eta_seconds == doctest::Approx(82.0));
  // A call that reserved 1,000 tokens and used 51,000 leaves 50,000 of debt (the bucket was
  // empty): 10 s of refill at 5,000 a second before any page goes.
  clock.advance(200ms);  // refills the 1,000 the call reserves
  std::get<fairlane::Lease>(budget.admit(1'000)).settle(51'000);
  CHECK(budget.tokens().level() == doctest::Approx(-50'000.0));
  CHECK(estimator.job(1, 10)->eta_seconds == doctest::Approx(92.0));
}

TEST_CASE("The asking user's own weight scales what the others send ahead") {
  FairScheduler scheduler;
  add_pages(scheduler, 1, 10, 10);  // A, weight 2
  add_pages(scheduler, 2, 20, 10);  // B, weight 1
  scheduler.set_weight(1, 2);
  Estimator estimator(scheduler, EstimatorConfig{.limits = kLab});
  // A's last page k = 10: B sends min(10, 10 x 1 / 2) = 5 meanwhile.
  //   ahead = 5 + 9 = 14; eta = 15 / 6.25 + 2 = 4.4 s
  CHECK(estimator.job(1, 10)->eta_seconds == doctest::Approx(4.4));
  // B's last page k = 10: A sends min(10, 10 x 2 / 1) = 10: 20 / 6.25 + 2 = 5.2 s
  CHECK(estimator.job(2, 20)->eta_seconds == doctest::Approx(5.2));
}

TEST_CASE("Pages that cost more count for more: DRR shares tokens") {
  FairScheduler scheduler;
  add_pages(scheduler, 1, 10, 40);  // A: 40 pages of 800
  Estimator estimator(scheduler, EstimatorConfig{.limits = kLab});
  // B asks for 10 pages of 1,600 tokens, twice the average reservation (800): while B
  // sends 10, A sends 20, and B's 10 count as 20 of the average.
  //   ahead = min(40, 20) + 20 = 40 average pages; eta = 40 / 6.25 + 2 = 8.4 s
  CHECK(estimator.estimate_new(2, 10, 1'600).eta_seconds == doctest::Approx(8.4));
  // At the average size: min(40, 10) + 10 = 20: 20 / 6.25 + 2 = 5.2 s
  CHECK(estimator.estimate_new(2, 10, 800).eta_seconds == doctest::Approx(5.2));
  CHECK(estimator.estimate_new(2, 10).eta_seconds == doctest::Approx(5.2));
}

TEST_CASE("Another lane's big pages count for their tokens, not as pages of the average") {
  // A has 10 pages of 8,000 tokens queued; B asks about 100 pages of 800 (the average
  // reservation, known from what has arrived). While B sends its 80,000 tokens, deficit
  // round robin lets A send as many: all of its 80,000.
  //   tokens: (100 + 100) average pages / 6.25 = 32 s; eta = 32 + 2 = 34 s
  // Counted as 10 average pages, A's backlog would look like 8,000 tokens: 110 / 6.25 + 2.
  FairScheduler scheduler;
  for (int i = 1; i <= 10; ++i) scheduler.add(QueuedPage{10'000 + i, 10, 1, 8'000});
  Estimator estimator(scheduler, EstimatorConfig{.limits = kLab});
  const auto b = estimator.estimate_new(2, 100, 800);
  CHECK(b.eta_seconds == doctest::Approx(34.0));
  // A's tokens count up to B's own: for 5 pages of 800 (4,000 tokens), min(80,000, 4,000)
  // = 4,000, 5 average pages: (5 + 5) / 6.25 + 2 = 3.6 s.
  CHECK(estimator.estimate_new(2, 5, 800).eta_seconds == doctest::Approx(3.6));
}

TEST_CASE("A lane's tail left out of a job's ETA counts as if it were not queued") {
  // Bob's lane holds an older job and a newer one behind it; Alice asks about her 20 pages.
  // Left out, Bob's newer job is not ahead of her: her ETA is as if only his older job were
  // queued, in pages (of the average size) and in tokens (of big pages).
  // Alice's 20 pages are worth 16,000 tokens: Bob's older job is below that in both.
  for (const std::int64_t cost : {800, 8'000}) {
    CAPTURE(cost);
    const int older = cost == 800 ? 10 : 1;
    const auto fill = [cost, older](FairScheduler& scheduler, bool newer) {
      add_pages(scheduler, 1, 10, 20);
      for (int i = 1; i <= older; ++i) scheduler.add(QueuedPage{20'000 + i, 20, 2, cost});
      if (!newer) return;
      for (int i = 1; i <= 30; ++i) scheduler.add(QueuedPage{21'000 + i, 21, 2, cost});
    };
    FairScheduler both;
    fill(both, true);
    FairScheduler older_only;
    fill(older_only, false);
    const Estimator with(both, EstimatorConfig{.limits = kLab});
    const Estimator without(older_only, EstimatorConfig{.limits = kLab});
    const std::vector<fairlane::LaneTail> newer{{2, 30, 30 * cost}};
    const auto left_out =
        with.job(1, 10, fairlane::Refunds::expected, fairlane::Competition::expected, newer);
    const auto counted = with.job(1, 10);
    const auto reference = without.job(1, 10);
    REQUIRE(left_out);
    CHECK(left_out->eta_seconds == doctest::Approx(reference->eta_seconds).epsilon(0.01));
    CHECK(left_out->position == reference->position);
    CHECK(counted->eta_seconds > reference->eta_seconds + 1.0);
    // A tail of Alice's own lane changes nothing: her lane is not ahead of her.
    const std::vector<fairlane::LaneTail> own{{1, 5, 5 * 800}};
    CHECK(with.job(1, 10, fairlane::Refunds::expected, fairlane::Competition::expected, own)
              ->eta_seconds == doctest::Approx(counted->eta_seconds));
  }
}

TEST_CASE("Until a call settles, a page is taken to use what the pages seen reserve") {
  FairScheduler scheduler;
  Estimator estimator(scheduler, EstimatorConfig{.limits = kLab});
  // Nothing seen: a page of 4,560 tokens counts 5.7 pages of the configured 800, each
  // using its 800: 100 of them use 456,000 tokens, 91.2 s at 5,000 a second, + 2 s.
  CHECK(estimator.estimate_new(1, 100, 4'560).eta_seconds == doctest::Approx(93.2));
  CHECK(estimator.alone_seconds(1, 100, 4'560) == doctest::Approx(93.2));

  // Pages that arrive set the average reservation to theirs, and usage with it.
  estimator.record_arrival(1, 10, 10 * 4'560);
  estimator.record_arrival(2, 10, 10 * 1'440);
  CHECK(estimator.avg_reserved_tokens_per_page() == doctest::Approx(3'000.0));
  CHECK(estimator.avg_tokens_per_page() == doctest::Approx(3'000.0));
  // The same job, in pages of 3,000 now: the same tokens, the same time.
  CHECK(estimator.estimate_new(1, 100, 4'560).eta_seconds == doctest::Approx(93.2));

  // The first settled call replaces them with its own ...
  estimator.record_settled(1'000, 4'560, 2s);
  CHECK(estimator.avg_tokens_per_page() == doctest::Approx(1'000.0));
  CHECK(estimator.avg_reserved_tokens_per_page() == doctest::Approx(4'560.0));
  // ... and later arrivals no longer move them.
  estimator.record_arrival(3, 10, 10 * 100);
  CHECK(estimator.avg_tokens_per_page() == doctest::Approx(1'000.0));
  CHECK(estimator.avg_reserved_tokens_per_page() == doctest::Approx(4'560.0));
}

TEST_CASE("A cheap page still costs a whole request when requests bind") {
  FairScheduler scheduler;
  add_pages(scheduler, 1, 10, 6);  // A: 6 pages of 800
  // 6 requests a minute bind (0.1 pages/s; tokens allow 6.25/s).
  Estimator estimator(scheduler, EstimatorConfig{.limits = {.requests_per_minute = 6,
                                                            .tokens_per_minute = 300'000,
                                                            .max_in_flight = 200}});
  REQUIRE(estimator.binding() == Limit::requests);
  // B asks for 30 pages of 100 tokens (1/8 of the average): DRR lets B send its 30 while A
  // sends min(6, 30/8) = 3.75, but each of B's pages takes a request's 10 s:
  //   ahead = 3.75 + 30 = 33.75 pages; eta = 33.75 / 0.1 + 2 = 339.5 s
  CHECK(estimator.estimate_new(2, 30, 100).eta_seconds == doctest::Approx(339.5));
  // When tokens bind, cheap pages count for their tokens: at the lab's limits B's 30 pages
  // of 400 tokens (half the average) are 15 pages' worth, and A sends min(6, 15) = 6:
  //   tokens: 21 / 6.25 = 3.36 s (requests: 36 / 25 = 1.44 s); eta = 3.36 + 2 = 5.36 s
  Estimator by_tokens(scheduler, EstimatorConfig{.limits = kLab});
  CHECK(by_tokens.estimate_new(2, 30, 400).eta_seconds == doctest::Approx(5.36));
  // At 100 tokens (1/8) the requests take longer than the tokens: A sends min(6, 3.75)
  // and B 30, 33.75 requests at 25 a second = 1.35 s (their tokens, 3.75 + 30/8 = 7.5
  // pages' worth, take 1.2 s): eta = 1.35 + 2 = 3.35 s.
  CHECK(by_tokens.estimate_new(2, 30, 100).eta_seconds == doctest::Approx(3.35));
}

TEST_CASE("A user's own queued pages count at their own cost, not at the new job's") {
  // B has 10 pages of 3,200 tokens queued (four average pages each) and asks about one page
  // of 800. Its own 10 go first: 40 average pages of tokens, 11 requests and calls.
  //   tokens: (40 + 1) / 6.25 = 6.56 s; requests: 11 / 25 = 0.44 s; eta = 6.56 + 2 = 8.56 s
  // Counted at the new page's size, the backlog would look like 11 pages: 11 / 6.25 + 2.
  FairScheduler scheduler;
  for (int i = 1; i <= 10; ++i) scheduler.add(QueuedPage{20'000 + i, 20, 2, 3'200});
  Estimator estimator(scheduler, EstimatorConfig{.limits = kLab});
  const auto one = estimator.estimate_new(2, 1, 800);
  CHECK(one.position == 10);
  CHECK(one.eta_seconds == doctest::Approx(8.56));

  // The same for a job already queued behind that backlog.
  scheduler.add(QueuedPage{21'001, 21, 2, 800});
  const auto queued = estimator.job(2, 21);
  REQUIRE(queued);
  CHECK(queued->position == 10);
  CHECK(queued->eta_seconds == doctest::Approx(8.56));
}

TEST_CASE("Work arriving ahead of a job stretches its ETA by 1 / (1 - rho)") {
  fairlane::FakeClock clock;
  FairScheduler scheduler;
  add_pages(scheduler, 1, 10, 10);  // user 1: job 10, 10 pages
  Estimator estimator(scheduler, EstimatorConfig{.limits = kLab, .arrival_window = 60s}, nullptr,
                      &clock);
  // No arrivals yet: (10 + 0) / 6.25 + 2 = 3.6 s.
  CHECK(estimator.job(1, 10)->eta_seconds == doctest::Approx(3.6));
  clock.advance(1h);
  // Three newcomers' books of 10 pages in every 6 s slot of the minute, each over rounds
  // [0, 10]: for a job whose last page is 10 rounds out a book weighs 10 x (1 - 5 / 10) = 5
  // pages, 15 pages every 6 s is 2.5 pages/s: rho = 2.5 / 6.25 = 0.4.
  fairlane::UserId newcomer = 100;
  for (int slot = 0; slot < 10; ++slot) {
    for (int book = 0; book < 3; ++book) estimator.record_arrival(++newcomer, 10);
    clock.advance(6s);
  }
  CHECK(estimator.competition(10.0) == doctest::Approx(0.4));
  //   eta = (10 / 6.25) / (1 - 0.4) + 2 = 4.667 s.
  CHECK(estimator.job(1, 10)->eta_seconds == doctest::Approx(1.6 / 0.6 + 2.0));
  // A new job of 10 pages counts them too (behind user 1's 10: (20 / 6.25) / 0.6 + 2), but
  // its own time does not (10 / 6.25 + 2).
  const auto fresh = estimator.estimate_new(40, 10);
  CHECK(fresh.eta_seconds == doctest::Approx(3.2 / 0.6 + 2.0));
  CHECK(fresh.own_seconds == doctest::Approx(3.6));
}

TEST_CASE("Until three slots of the window have ended, arrivals are measured over a tenth of it") {
  fairlane::FakeClock clock;
  FairScheduler scheduler;
  Estimator estimator(scheduler, EstimatorConfig{.limits = kLab, .arrival_window = 60s}, nullptr,
                      &clock);
  CHECK(estimator.competition(10.0) == 0.0);
  // A newcomer's one-page book every 0.6 s for the first 6 s, then every 1.2 s until 18 s:
  // each at round 0.5 of its lane, weighing 1 - 0.5 / 10 = 0.95 for a job 10 rounds out.
  fairlane::UserId newcomer = 100;
  const auto arrive = [&](int books, std::chrono::milliseconds apart) {
    for (int i = 0; i < books; ++i) {
      estimator.record_arrival(++newcomer, 1);
      clock.advance(apart);
    }
  };
  arrive(10, 600ms);
  // At 6 s the window's 6 s slots have not measured anything (one has ended). The warm-up's
  // 0.6 s slots have: nine ended, the busiest counted as the next busiest, 9 x 0.95 pages in
  // 9 x 0.6 s, so 1.5833 pages a second: rho = 1.5833 / 6.25 = 0.2533.
  CHECK(estimator.competition(10.0) == doctest::Approx(0.95 / 0.6 / 6.25));
  arrive(5, 1200ms);
  // At 12 s two slots of the window have ended (10 books, then 5): one may be a burst, so the
  // warm-up still answers: four of its nine ended slots hold a book (at 7.2, 8.4, 9.6 and
  // 10.8 s), the busiest counted as the next busiest (Busiest::as_next; left out, it would
  // say 3 x 0.95 in 8 x 0.6 s, 0.59 pages a second), so 4 x 0.95 pages in 9 x 0.6 s.
  CHECK(estimator.competition(10.0) == doctest::Approx(4.0 * 0.95 / 5.4 / 6.25));
  arrive(5, 1200ms);
  // At 24 s, with nothing more, four have ended (10, 5, 5 and none): the busiest left out,
  // 10 x 0.95 in 18 s. The warm-up, which has seen nothing for 6 s, would say 0.
  clock.advance(6s);
  CHECK(estimator.competition(10.0) == doctest::Approx(10.0 * 0.95 / 18.0 / 6.25));
}

TEST_CASE("An estimator built again goes on with what the one before it saw arrive") {
  fairlane::FakeClock clock;
  FairScheduler scheduler;
  add_pages(scheduler, 1, 10, 10);
  const EstimatorConfig config{.limits = kLab, .arrival_window = 60s};
  Estimator before(scheduler, config, nullptr, &clock);
  // As in the tests above: a newcomer's one-page book every 0.6 s for 6 s, measured by the
  // warm-up; then three newcomers' books of 10 pages every 6 s, rho = 0.4.
  fairlane::UserId newcomer = 100;
  for (int i = 0; i < 10; ++i) {
    before.record_arrival(++newcomer, 1);
    clock.advance(600ms);
  }
  REQUIRE(before.competition(10.0) == doctest::Approx(0.95 / 0.6 / 6.25));
  Estimator early(scheduler, config, nullptr, &clock);
  CHECK(early.competition(10.0) == 0.0);  // built from the lanes, it expects no one
  early.continue_arrivals(before);
  CHECK(early.competition(10.0) == doctest::Approx(before.competition(10.0)));
  clock.advance(1h);
  for (int slot = 0; slot < 10; ++slot) {
    for (int book = 0; book < 3; ++book) before.record_arrival(++newcomer, 10);
    clock.advance(6s);
  }
  REQUIRE(before.competition(10.0) == doctest::Approx(0.4));
  Estimator rebuilt(scheduler, config, nullptr, &clock);
  CHECK(rebuilt.competition(10.0) == 0.0);
  rebuilt.continue_arrivals(before);
  CHECK(rebuilt.competition(10.0) == doctest::Approx(0.4));
  CHECK(rebuilt.job(1, 10)->eta_seconds == doctest::Approx(before.job(1, 10)->eta_seconds));
  // And goes on from there: what arrives next counts with what came before...
  for (int slot = 0; slot < 5; ++slot) {
    for (int book = 0; book < 3; ++book) rebuilt.record_arrival(++newcomer, 10);
    clock.advance(6s);
  }
  CHECK(rebuilt.competition(10.0) == doctest::Approx(0.4));
  // ... and all of it leaves the window in time.
  clock.advance(61s);
  CHECK(rebuilt.competition(10.0) == 0.0);
  // Only from arrivals of the same window.
  Estimator other(scheduler, EstimatorConfig{.limits = kLab, .arrival_window = 120s}, nullptr,
                  &clock);
  CHECK_THROWS_AS(other.continue_arrivals(before), std::invalid_argument);
}

TEST_CASE("A restart's arrivals, replayed from the jobs kept, count as if they had been live") {
  fairlane::FakeClock clock;
  FairScheduler scheduler;
  const EstimatorConfig config{.limits = kLab, .arrival_window = 60s};
  // Over 90 s, a newcomer's book of 1 to 4 pages every 1.5 s; its first 20 s also feed the
  // warm-up (6 s slots of the 60 s window end from 12 s).
  for (const auto history : {90s, 10s}) {
    CAPTURE(history.count());
    Estimator live(scheduler, config, nullptr, &clock);
    const auto began = clock.now();
    std::vector<std::pair<fairlane::Clock::time_point, std::int64_t>> jobs;
    fairlane::UserId newcomer = 100;
    for (auto t = 0ms; t < history; t += 1500ms) {
      const std::int64_t pages = 1 + (t.count() / 1500) % 4;
      live.record_arrival(++newcomer, pages);
      jobs.emplace_back(clock.now(), pages);
      clock.advance(1500ms);
    }
    REQUIRE(live.competition(10.0) > 0.0);
    Estimator restarted(scheduler, config, nullptr, &clock);
    CHECK(restarted.competition(10.0) == 0.0);
    restarted.arrivals_counted_for(clock.now() - began);
    for (const auto& [at, pages] : jobs) restarted.record_arrived(clock.now() - at, 1, pages, 0);
    CHECK(restarted.competition(10.0) == doctest::Approx(live.competition(10.0)));
    CHECK(restarted.competition(3.0) == doctest::Approx(live.competition(3.0)));
    // And it goes on as the live one does.
    for (int i = 0; i < 20; ++i) {
      live.record_arrival(++newcomer, 2);
      restarted.record_arrival(++newcomer, 2);
      clock.advance(1500ms);
    }
    CHECK(restarted.competition(10.0) == doctest::Approx(live.competition(10.0)));
    clock.advance(1h);
  }
}

TEST_CASE("A replayed job behind its user's earlier pages delays only jobs further out") {
  fairlane::FakeClock clock;
  FairScheduler scheduler;
  const EstimatorConfig config{.limits = kLab, .arrival_window = 60s};
  Estimator front(scheduler, config, nullptr, &clock);
  Estimator behind(scheduler, config, nullptr, &clock);
  for (Estimator* e : {&front, &behind}) e->arrivals_counted_for(60s);
  // A book of 10 pages every 6 s for the last minute: at the front of its lane, or behind
  // 100 pages of its user's that had not ended when it came.
  for (auto ago = 57s; ago > 0s; ago -= 6s) {
    front.record_arrived(ago, 7, 10, 0);
    behind.record_arrived(ago, 7, 10, 100);
  }
  CHECK(front.competition(50.0) > 0.0);
  CHECK(behind.competition(50.0) == 0.0);  // rounds 100 to 110: behind a job 50 rounds out
  CHECK(behind.competition(1'000.0) > 0.0);
  // What is older than the window, or than the counting, is left out.
  Estimator late(scheduler, config, nullptr, &clock);
  late.arrivals_counted_for(30s);
  for (auto ago = 57s; ago > 30s; ago -= 6s) late.record_arrived(ago, 7, 10, 0);
  CHECK(late.competition(50.0) == 0.0);
}

TEST_CASE("The warm-up takes no burst for a rate: it needs three slots with arrivals") {
  fairlane::FakeClock clock;
  FairScheduler scheduler;
  Estimator estimator(scheduler, EstimatorConfig{.limits = kLab, .arrival_window = 60s}, nullptr,
                      &clock);
  // Two books at once and one 3 s later (a heavy user's shelf, then a light user's book):
  // two busy slots of 0.6 s, the busiest left out would leave one book as a rate.
  estimator.record_arrival(100, 10);
  estimator.record_arrival(101, 10);
  clock.advance(3s);
  estimator.record_arrival(102, 10);
  clock.advance(3s);
  CHECK(estimator.competition(10.0) == 0.0);
}

TEST_CASE("A user's own arrivals land behind its queued pages, where they delay nothing") {
  fairlane::FakeClock clock;
  FairScheduler scheduler;
  add_pages(scheduler, 1, 10, 16);
  Estimator estimator(scheduler, EstimatorConfig{.limits = kLab, .arrival_window = 60s}, nullptr,
                      &clock);
  clock.advance(1h);
  // User 1 adds 10 pages every slot (rounds [16, 26], behind its 16); its job is 16 out.
  for (int slot = 0; slot < 10; ++slot) {
    estimator.record_arrival(1, 10);
    clock.advance(6s);
  }
  CHECK(estimator.competition(16.0) == 0.0);
  CHECK(estimator.competition(26.0) > 0.0);  // a job further out would meet them
}

TEST_CASE("Arriving work never takes more than max_competition of the rate") {
  fairlane::FakeClock clock;
  FairScheduler scheduler;
  add_pages(scheduler, 1, 10, 10);
  Estimator estimator(
      scheduler, EstimatorConfig{.limits = kLab, .arrival_window = 60s, .max_competition = 0.75},
      nullptr, &clock);
  clock.advance(1h);
  fairlane::UserId newcomer = 100;
  for (int slot = 0; slot < 10; ++slot) {
    for (int book = 0; book < 100; ++book) estimator.record_arrival(++newcomer, 10);
    clock.advance(6s);
  }
  CHECK(estimator.competition(10.0) == doctest::Approx(0.75));
  CHECK(estimator.job(1, 10)->eta_seconds == doctest::Approx(1.6 / 0.25 + 2.0));
}

TEST_CASE("Arrivals take their share of each bound at that bound's rate, not all at mu") {
  fairlane::FakeClock clock;
  fairlane::Budget budget(clock, kLab);
  FairScheduler scheduler;
  add_pages(scheduler, 1, 10, 375);
  Estimator estimator(scheduler, EstimatorConfig{.limits = kLab, .arrival_window = 60s}, &budget,
                      &clock);
  // Full buckets, nothing arriving: the credit pays for all 375 (300,000 / 800), the calls
  // send 200 at once and the other 175 from 2 s on at 100 a second: 2 + 1.75 + 2 = 5.75 s.
  CHECK(estimator.job(1, 10)->eta_seconds == doctest::Approx(5.75));
  clock.advance(1h);
  // Three newcomers' books of 10 pages (rounds [0, 10]) every 6 s: for a job 375 rounds out
  // each weighs 10 x (1 - 5 / 375) = 9.8667 pages, 3 x 9.8667 / 6 = 4.9333 pages a second.
  fairlane::UserId newcomer = 100;
  for (int slot = 0; slot < 10; ++slot) {
    for (int book = 0; book < 3; ++book) estimator.record_arrival(++newcomer, 10);
    clock.advance(6s);
  }
  const double competing = 3.0 * (10.0 - 50.0 / 375.0) / 6.0;
  CHECK(estimator.competition(375.0) == doctest::Approx(competing / 6.25));
  // The credit still covers the job at once: 375 + 4.9333 T <= 375 + 6.25 T for any T. The
  // calls are shared at their own rate, 100 a second: 3.75 / (1 - 4.9333 / 100) + 2 = 5.945 s.
  // (Stretching the whole by 1 / (1 - 4.9333 / 6.25), as before, said 3.75 / 0.2107 + 2 = 19.8 s.)
  CHECK(estimator.job(1, 10)->eta_seconds ==
        doctest::Approx(3.75 / (1.0 - competing / 100.0) + 2.0));
}

TEST_CASE("Reservations above usage: calls go in waves as large as the tokens level holds") {
  EightTimesUsage f;
  fairlane::Budget& budget = f.budget;
  Estimator& estimator = f.estimator;
  // Leave 100,000 tokens in the bucket: a call that reserved and used 200,000.
  std::get<fairlane::Lease>(budget.admit(200'000)).settle(200'000);
  REQUIRE(budget.tokens().level() == doctest::Approx(100'000.0));
  // The credit (100,000 / 800 = 125 pages) covers the book; the calls bound said 15.625 at
  // once (100,000 / 6,400) and the rest at 46.875 per 2 s: 2 + 84.375 / 23.4375 + 2 = 7.6 s.
  // But each wave is only what the level holds: level_{i+1} = level_i - 800 w_i + 10,000
  // (refill 5,000 a second), w_i = level_i / 6,400, so the waves shrink from 15.6 towards the
  // steady 12.5 (= mu x 2 s, level 80,000) with ratio q = 1 - 800 / 6,400 = 0.875, and x waves
  // send S(x) = 12.5 x + (100,000 - 80,000) / 800 x (1 - 0.875^x). S(x) = 100 at x = 6.806
  // (S(6) = 88.8, S(7) = 102.7, by hand), the last page goes (x - 1) x 2 s from now:
  //   eta = 5.806 x 2 + 2 = 13.61 s.
  // (Wave by wave: 15.6, 15.2, 14.9, 14.6, 14.3, 14.1, 13.9: the 100th goes with the 7th
  // wave, at 12 s, and is answered at 14 s.)
  CHECK(estimator.job(1, 10)->eta_seconds == doctest::Approx(13.612).epsilon(0.001));
}

TEST_CASE("A job told its ETA counts the refunds the calls out bring back, a promise does not") {
  EightTimesUsage f;
  fairlane::Budget& budget = f.budget;
  Estimator& estimator = f.estimator;
  // 40 calls out, 6,400 reserved each: 44,000 tokens left, and 5,600 to come back from each
  // within a latency.
  std::vector<fairlane::Lease> out;
  for (int i = 0; i < 40; ++i) out.push_back(std::get<fairlane::Lease>(budget.admit(6'400)));
  REQUIRE(budget.tokens().level() == doctest::Approx(44'000.0));
  // Counted when back, as the door promises: the credit pays for 44,000 / 800 = 55 pages,
  // the other 45 go at mu = 6.25 a second: 7.2 s, + 2 s for the last call.
  CHECK(estimator.job(1, 10, fairlane::Refunds::when_back)->eta_seconds == doctest::Approx(9.2));
  // Counted as they will come back, the credit is 44,000 + 40 x 5,600 = 268,000 tokens, 335
  // pages, and the calls bound sets the time: 6.875 pages go at once, the 40 out end over
  // the next 2 s, and the other 53.125 go at 46.875 per 2 s once those sent now are back:
  // 2 + 53.125 / 23.4375 = 4.267 s, + 2 s. (The waves bound says 3.14 s.)
  CHECK(estimator.job(1, 10)->eta_seconds == doctest::Approx(2.0 + 53.125 / 23.4375 + 2.0));
  CHECK(estimator.job(1, 10, fairlane::Refunds::expected)->eta_seconds ==
        doctest::Approx(estimator.job(1, 10)->eta_seconds));
}

TEST_CASE("Given the budget, mu follows the limits the provider announces") {
  fairlane::FakeClock clock;
  fairlane::Budget budget(clock, kLab);
  FairScheduler scheduler;
  Estimator estimator(scheduler, EstimatorConfig{.limits = kLab}, &budget);
  CHECK(estimator.mu() == doctest::Approx(6.25));
  // The provider says its token limit is half the configured one: 150000 / 60 / 800.
  budget.follow_announced(std::nullopt, 150'000);
  CHECK(estimator.mu() == doctest::Approx(3.125));
  CHECK(estimator.binding() == Limit::tokens);
}

TEST_CASE("Other lanes count at what their own pages use: the tokens fair order shares") {
  // User 1's pages reserve 1,000 and use all of it; user 2's reserve 4,000 and use 1,000.
  // Fair order charges each lane what its own pages use (FairScheduler::settle), 1,000 a
  // page for both, so the two lanes alternate. Counted by reservation, user 2's pages would
  // look four times as heavy: its ETA too long, and user 1's, ahead of which user 2 would
  // seem to send a quarter of what it does, too short.
  FairScheduler scheduler;
  Estimator estimator(scheduler, EstimatorConfig{.limits = kLab});
  learn(scheduler, {&estimator}, {QueuedPage{1, 1, 1, 1'000}, QueuedPage{2, 2, 2, 4'000}},
        [](const QueuedPage&) { return 1'000; });
  // Averages: 1,000 used and 2,500 reserved a page, 2 s a call; the tokens bind at 300,000
  // a minute, 5 pages of 1,000 a second.
  REQUIRE(estimator.mu() == doctest::Approx(5.0));

  SUBCASE("A light user behind a full one") {
    for (int i = 0; i < 100; ++i) scheduler.add(QueuedPage{100 + i, 10, 1, 1'000});
    for (int i = 0; i < 10; ++i) scheduler.add(QueuedPage{300 + i, 20, 2, 4'000});
    // While user 2 sends its 10 pages, user 1 sends 10: 20,000 tokens, 4 s, + 2 s for the
    // last call. (By reservation: 40,000 + 40,000 reserved, 32 pages of the average, 8.4 s.)
    const auto light = estimator.job(2, 20);
    REQUIRE(light);
    CHECK(light->eta_seconds == doctest::Approx(6.0));
  }
  SUBCASE("A full user behind a light one") {
    for (int i = 0; i < 100; ++i) scheduler.add(QueuedPage{300 + i, 20, 2, 4'000});
    // User 1 asks about 10 pages of 1,000: user 2 sends 10 meanwhile, 20,000 tokens, 6 s.
    // (By reservation: 10,000 of user 2's 400,000 ahead, 8 pages of the average, 3.6 s.)
    CHECK(estimator.estimate_new(1, 10, 1'000).eta_seconds == doctest::Approx(6.0));
  }
}

TEST_CASE("A user's own pages hold what they reserve of the tokens level, whatever they use") {
  // User 1's pages reserve 6,400 and use 800; user 2's reserve and use 800: on average a
  // page reserves 3,600. Fair order counts user 1's pages at what they use, but each of its
  // calls out holds its 6,400 of the tokens level: a full level of 300,000 sends 46 of them
  // at once, and the rest of a 100-page book goes as the refunds come back, a latency later.
  fairlane::FakeClock clock;
  fairlane::Budget budget(clock, kLab);
  FairScheduler scheduler;
  Estimator estimator(scheduler, EstimatorConfig{.limits = kLab}, &budget);
  learn(scheduler, {&estimator}, {QueuedPage{1, 1, 1, 6'400}, QueuedPage{2, 2, 2, 800}},
        [](const QueuedPage&) { return 800; });
  REQUIRE(scheduler.lane_usage(1) == doctest::Approx(0.125));
  // The same question of a scheduler that has not learned what user 1's pages use: the
  // calls bound is the same, since it counts what the pages reserve.
  FairScheduler unlearned;
  Estimator reserved(unlearned, EstimatorConfig{.limits = kLab}, &budget);
  reserved.record_settled(800, 6'400, 2s);
  reserved.record_settled(800, 800, 2s);
  const auto eta = estimator.estimate_new(1, 100, 6'400);
  CHECK(eta.eta_seconds == doctest::Approx(reserved.estimate_new(1, 100, 6'400).eta_seconds));
  CHECK(eta.eta_seconds >= 4.0 + 2.0);
}

TEST_CASE(
    "A lane's pages count at the tokens they used over those they reserved, as the averages do") {
  // One user alone, whose pages reserve 1,000 and use 100, or reserve and use 3,000: 3,100
  // of 4,000 reserved. Its lane's usage is that ratio of the averages, as the estimator's
  // own averages are (the mean of each page's ratio, 0.55, would count its next 100 pages of
  // 2,000 at 110,000 tokens where they use 155,000: 24 s promised for 33).
  FairScheduler scheduler;
  Estimator estimator(scheduler, EstimatorConfig{.limits = kLab});
  FairScheduler fresh;
  Estimator unlearned(fresh, EstimatorConfig{.limits = kLab});
  learn(scheduler, {&estimator, &unlearned},
        {QueuedPage{1, 1, 1, 1'000}, QueuedPage{2, 1, 1, 3'000}},
        [](const QueuedPage& page) { return page.cost == 1'000 ? 100 : 3'000; });
  REQUIRE(scheduler.lane_usage(1) == doctest::Approx(3'100.0 / 4'000.0));
  // Alone, the user's lane at its own usage is the average: the same ETA as unlearned.
  CHECK(estimator.estimate_new(1, 100, 2'000).eta_seconds ==
        doctest::Approx(unlearned.estimate_new(1, 100, 2'000).eta_seconds));
  CHECK(estimator.estimate_new(1, 100, 2'000).eta_seconds ==
        doctest::Approx(100 * 2'000 * 0.775 / 5'000.0 + 2.0));
}

TEST_CASE("A job's time alone counts its user's pages at what they use, as its ETA does") {
  // User 1's pages reserve and use 1,000; user 2's reserve 4,000 and use 1,000. The job-size
  // limit (alone_seconds) and the door's own time of a new job (own_seconds) agree, each at
  // the asking user's usage: 300 pages of 1,000 from user 1 use 300,000 tokens, 60 s.
  FairScheduler scheduler;
  Estimator estimator(scheduler, EstimatorConfig{.limits = kLab});
  learn(scheduler, {&estimator}, {QueuedPage{1, 1, 1, 1'000}, QueuedPage{2, 2, 2, 4'000}},
        [](const QueuedPage&) { return 1'000; });
  CHECK(estimator.alone_seconds(1, 300, 1'000) == doctest::Approx(60.0 + 2.0));
  CHECK(estimator.alone_seconds(1, 300, 1'000) ==
        doctest::Approx(estimator.estimate_new(1, 300, 1'000).own_seconds));
  CHECK(estimator.alone_seconds(2, 300, 4'000) == doctest::Approx(60.0 + 2.0));
}

TEST_CASE("A lane's usage is not applied to new pages that reserve unlike its own") {
  // User 1's pages reserved 6,400 and used 800. A new job of pages reserving 1,600 (a
  // smaller max_tokens) is not that kind of page: counted at 0.125 they would look like 200
  // tokens each, where they may use all of theirs. Pages of another size (more than twice
  // or less than half the lane's average cost) count at the average usage, the estimator's
  // guess for pages it has not seen; pages of about the lane's own size at the lane's.
  FairScheduler scheduler;
  Estimator estimator(scheduler, EstimatorConfig{.limits = kLab});
  learn(scheduler, {&estimator}, {QueuedPage{1, 1, 1, 6'400}, QueuedPage{2, 2, 2, 800}},
        [](const QueuedPage&) { return 800; });
  // Averages: 800 used, 3,600 reserved: 2/9 of a reservation.
  const double average = 800.0 / 3'600.0;
  CHECK(estimator.estimate_new(1, 100, 1'600).eta_seconds ==
        doctest::Approx(100 * 1'600 * average / 5'000.0 + 2.0));
  CHECK(estimator.estimate_new(1, 100, 6'000).eta_seconds ==
        doctest::Approx(100 * 6'000 * 0.125 / 5'000.0 + 2.0));
}

TEST_CASE("The tokens the bucket keeps as headroom are not counted as credit") {
  // fairlane serve keeps 250 ms of the refill unspent (BudgetLimits::served): a call goes
  // once its cost and that headroom fit. Counted as credit, the door promised a burst the
  // budget does not send: 400 pages of 800 tokens at 300,000 TPM, the bucket full, go 375
  // at once and the rest at the refill, 6.25 a second; with 1,250 kept, 1.56 pages fewer
  // go at once, a quarter second later.
  constexpr BudgetLimits kTokensOnly{.tokens_per_minute = 300'000};
  const BudgetLimits kept = BudgetLimits{.tokens_per_minute = 300'000, .token_headroom = 1'250};
  fairlane::FakeClock clock;
  fairlane::Budget plain(clock, kTokensOnly);
  fairlane::Budget served(clock, kept);
  FairScheduler scheduler;
  Estimator without(scheduler, EstimatorConfig{.limits = kTokensOnly, .ewma_alpha = 1.0}, &plain);
  Estimator with(scheduler, EstimatorConfig{.limits = kept, .ewma_alpha = 1.0}, &served);
  without.record_settled(800, 800, 2s);
  with.record_settled(800, 800, 2s);
  const double later =
      with.estimate_new(1, 400).eta_seconds - without.estimate_new(1, 400).eta_seconds;
  CHECK(later > 0.24);
  CHECK(later < 0.26);
  // The bucket at 500, below the 1,250 kept: the first call waits for the refill (5,000 a
  // second) to bring it to the headroom, 0.15 s, not to 0 (before: 0.003 s apart).
  plain.tokens().sync_down(500);
  served.tokens().sync_down(500);
  const double behind =
      with.estimate_new(1, 10).eta_seconds - without.estimate_new(1, 10).eta_seconds;
  CHECK(behind > 0.14);
  CHECK(behind < 0.26);
}
