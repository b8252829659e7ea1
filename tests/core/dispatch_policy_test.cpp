// The dispatch loop's decisions on a FakeClock: what goes next, and what each outcome of a
// call does to the lease, the lanes, the pauses and the page. Nothing sleeps; time moves
// only when a test advances it.
#include <doctest/doctest.h>

#include <chrono>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "core/fake_clock.hpp"
#include "fairlane/core/dispatch_policy.hpp"

using namespace std::chrono_literals;
using fairlane::BudgetLimits;
using fairlane::CallOutcome;
using fairlane::CallVerdict;
using fairlane::Clock;
using fairlane::DispatchPolicy;
using fairlane::DispatchPolicyConfig;
using fairlane::DispatchStep;
using fairlane::Lease;
using fairlane::QueuedPage;
using fairlane::WallTime;
namespace call = fairlane::call;
namespace step = fairlane::step;
namespace verdict = fairlane::verdict;

namespace {

constexpr fairlane::UserId kAlice = 1;
constexpr fairlane::UserId kBob = 2;

// A FairOrder that also records the lane corrections it is asked for.
class RecordingOrder final : public fairlane::PageOrder {
 public:
  explicit RecordingOrder(fairlane::FairScheduler& scheduler) : inner_(scheduler) {}
  [[nodiscard]] const QueuedPage* peek() override { return inner_.peek(); }
  QueuedPage take() override { return inner_.take(); }
  void add(const QueuedPage& page) override { inner_.add(page); }
  void put_back(const QueuedPage& page) override { inner_.put_back(page); }
  void settle(const QueuedPage& page, std::int64_t used) override {
    corrections.emplace_back(page.user_id, used - page.charged);
    inner_.settle(page, used);
  }
  void refund(const QueuedPage& page) override { inner_.refund(page); }
  std::vector<QueuedPage> remove_job(fairlane::UserId user, fairlane::JobId job) override {
    return inner_.remove_job(user, job);
  }

  std::vector<std::pair<fairlane::UserId, std::int64_t>> corrections;

 private:
  fairlane::FairOrder inner_;
};

DispatchPolicyConfig config_with(std::int64_t max_attempts = 5, std::int64_t max_requeues = 100) {
  DispatchPolicyConfig c;
  c.max_attempts = max_attempts;
  c.max_requeues = max_requeues;
  c.backoff_base = 1s;
  c.backoff_max = 60s;
  c.default_pause = 1s;
  c.call_timeout = 120s;
  c.seed = 7;
  return c;
}

constexpr BudgetLimits kRoomy{
    .requests_per_minute = 6'000, .tokens_per_minute = 600'000, .max_in_flight = 4};

struct Rig {
  explicit Rig(BudgetLimits limits = kRoomy, DispatchPolicyConfig config = config_with())
      : budget(clock, limits),
        order(scheduler),
        estimator(scheduler, fairlane::EstimatorConfig{.limits = limits}, &budget),
        policy(clock, wall, budget, order, estimator, config) {}

  // Enqueues `count` pages of `cost` for `user` in `job`, ids job*100 + 1, + 2, ...
  void add(fairlane::UserId user, fairlane::JobId job, int count, std::int64_t cost = 1'000) {
    for (int i = 1; i <= count; ++i)
      REQUIRE(policy.enqueue(QueuedPage{job * 100 + i, job, user, cost}));
  }

  // The next step, which must be a Send.
  step::Send send() {
    DispatchStep next = policy.next_step();
    REQUIRE(std::holds_alternative<step::Send>(next));
    return std::get<step::Send>(std::move(next));
  }

  CallVerdict end(step::Send& sent, call::Answered answered) {
    return policy.on_outcome(sent.page, sent.lease, CallOutcome{answered, 2s});
  }
  template <typename End>
  CallVerdict end(step::Send& sent, End how) {
    return policy.on_outcome(sent.page, sent.lease, CallOutcome{std::move(how), 100ms});
  }

  [[nodiscard]] Clock::time_point now() const { return clock.now(); }
  [[nodiscard]] std::int64_t tokens_spent() const {
    return budget.tokens().capacity() - budget.tokens().remaining();
  }
  [[nodiscard]] std::int64_t requests_spent() const {
    return budget.requests().capacity() - budget.requests().remaining();
  }

  fairlane::FakeClock clock{Clock::time_point{} + 1000s};
  fairlane::FakeWallClock wall{clock, WallTime{} + std::chrono::hours(480'000)};
  fairlane::Budget budget;
  fairlane::FairScheduler scheduler;
  RecordingOrder order;
  fairlane::Estimator estimator;
  DispatchPolicy policy;
};

// The verdict's action, which must be a T (a copy: verdicts are often temporaries).
template <typename T>
T as(const CallVerdict& v) {
  REQUIRE(std::holds_alternative<T>(v.action));
  return std::get<T>(v.action);
}

}  // namespace

// ---- the next step -------------------------------------------------------------------------

TEST_CASE("With nothing queued the next step is idle, with no time to look again") {
  Rig rig;
  const DispatchStep next = rig.policy.next_step();
  REQUIRE(std::holds_alternative<step::Idle>(next));
  CHECK(std::get<step::Idle>(next).until == Clock::time_point::max());
  CHECK(fairlane::wake_time(next) == Clock::time_point::max());
}

TEST_CASE("The next step sends pages in fair order, each with its lease, and counts them out") {
  Rig rig;
  rig.add(kAlice, 1, 3);
  rig.add(kBob, 2, 3);
  auto first = rig.send();
  auto second = rig.send();
  auto third = rig.send();
  CHECK(first.page.user_id == kAlice);
  CHECK(second.page.user_id == kBob);
  CHECK(third.page.user_id == kAlice);
  CHECK(third.page.page_id == 102);
  CHECK(first.lease.open());
  CHECK(first.lease.reserved_tokens() == 1'000);
  CHECK(rig.policy.calls_out() == 3);
  CHECK(rig.scheduler.size() == 3);
  CHECK(fairlane::wake_time(DispatchStep{std::move(first)}) == std::nullopt);
}

TEST_CASE("A job's pages count as arrivals at the rounds they take in their lane, not behind it") {
  fairlane::FakeClock clock{Clock::time_point{} + 1000s};
  fairlane::FakeWallClock wall{clock, WallTime{} + std::chrono::hours(480'000)};
  // Limits that leave the competition far below its cap: mu = 1,000 pages a second.
  const BudgetLimits wide{
      .requests_per_minute = 60'000, .tokens_per_minute = 60'000'000, .max_in_flight = 100'000};
  fairlane::Budget budget(clock, wide);
  fairlane::FairScheduler scheduler;
  fairlane::FairOrder order(scheduler);
  fairlane::Estimator estimator(
      scheduler, fairlane::EstimatorConfig{.limits = wide, .arrival_window = 60s}, &budget, &clock);
  DispatchPolicy policy(clock, wall, budget, order, estimator, config_with());
  // A newcomer's book of 10 pages every 0.6 s, each on an empty lane: rounds [0, 10] of it.
  for (fairlane::JobId job = 1; job <= 10; ++job) {
    std::vector<QueuedPage> pages;
    for (int i = 1; i <= 10; ++i) pages.push_back(QueuedPage{job * 100 + i, job, 100 + job, 1'000});
    CHECK(policy.enqueue_job(pages) == 10);
    clock.advance(600ms);
  }
  // At 6 s nine of the warm-up's 0.6 s slots have ended, the busiest left out: for a job 20
  // rounds out a book weighs 10 x (1 - 5 / 20) = 7.5 pages, one every 0.6 s. Counted behind
  // themselves, at rounds [10, 20], they would weigh 10 x (1 - 15 / 20) = 2.5.
  CHECK(estimator.competition(20.0) == doctest::Approx(7.5 / 0.6 / estimator.mu()));
  // Pages known already join no lane again, and arrive no more.
  std::vector<QueuedPage> again{QueuedPage{101, 1, 101, 1'000}};
  CHECK(policy.enqueue_job(again) == 0);
}

TEST_CASE("A page already known is not enqueued twice, nor restored") {
  Rig rig;
  rig.add(kAlice, 1, 1);
  CHECK_FALSE(rig.policy.enqueue(QueuedPage{101, 1, kAlice, 1'000}));
  CHECK(rig.scheduler.size() == 1);
  CHECK(rig.policy.tracked_pages() == 1);
  // A start that reads the store's lanes after the job was added.
  CHECK_FALSE(rig.policy.restore(QueuedPage{101, 1, kAlice, 1'000}, 0, std::nullopt));
  CHECK(rig.scheduler.size() == 1);
  CHECK(rig.policy.tracked_pages() == 1);
  CHECK(rig.send().page.page_id == 101);
  CHECK(std::holds_alternative<step::Idle>(rig.policy.next_step()));
}

TEST_CASE("A page the buckets cannot take sleeps to the exact refill time and keeps its place") {
  // 60 requests a minute: one a second once the bucket is spent.
  Rig rig(BudgetLimits{.requests_per_minute = 60, .tokens_per_minute = 0, .max_in_flight = 0});
  rig.add(kAlice, 1, 61);
  rig.add(kBob, 2, 1);
  for (int i = 0; i < 60; ++i) (void)rig.send();  // the full bucket's 60 requests
  const QueuedPage* head = rig.scheduler.peek();
  REQUIRE(head != nullptr);
  const auto waiting = head->page_id;
  const DispatchStep next = rig.policy.next_step();
  REQUIRE(std::holds_alternative<step::SleepUntil>(next));
  CHECK(std::get<step::SleepUntil>(next).until == rig.now() + 1s);
  rig.clock.advance(999ms);
  CHECK(std::holds_alternative<step::SleepUntil>(rig.policy.next_step()));
  rig.clock.advance(1ms);
  CHECK(rig.send().page.page_id == waiting);
}

TEST_CASE("With the in-flight cap full the next step waits for a call to end") {
  Rig rig(BudgetLimits{.requests_per_minute = 0, .tokens_per_minute = 0, .max_in_flight = 1});
  rig.add(kAlice, 1, 2);
  auto first = rig.send();
  const DispatchStep next = rig.policy.next_step();
  REQUIRE(std::holds_alternative<step::WaitForCall>(next));
  CHECK(std::get<step::WaitForCall>(next).until == Clock::time_point::max());
  (void)rig.end(first, call::Answered{300, 100});
  CHECK(rig.send().page.page_id == 102);
}

TEST_CASE("A page larger than a minute's TPM fails at once, naming its size") {
  Rig rig(BudgetLimits{.requests_per_minute = 600, .tokens_per_minute = 200, .max_in_flight = 4});
  rig.add(kAlice, 1, 1, 300);
  DispatchStep next = rig.policy.next_step();
  REQUIRE(std::holds_alternative<step::FailPage>(next));
  const auto& failed = std::get<step::FailPage>(next);
  CHECK(failed.page.page_id == 101);
  CHECK(failed.reason == "the page needs 300 tokens, more than the provider's 200 a minute");
  CHECK(rig.policy.tracked_pages() == 0);
  CHECK(rig.policy.calls_out() == 0);
  CHECK(rig.requests_spent() == 0);
  CHECK(fairlane::wake_time(next) == std::nullopt);
}

TEST_CASE("The time from joining the lane to the first call is given once") {
  Rig rig;
  rig.add(kAlice, 1, 1);
  rig.clock.advance(3s);
  auto sent = rig.send();
  CHECK(rig.policy.first_call_wait(sent.page.page_id) == 3s);
  CHECK(rig.policy.first_call_wait(sent.page.page_id) == std::nullopt);
}

// ---- the outcome table ---------------------------------------------------------------------

TEST_CASE("An answer settles the lease with the usage, teaches the estimator, corrects the lane") {
  Rig rig;
  rig.add(kAlice, 1, 1);
  auto sent = rig.send();
  const CallVerdict v = rig.end(sent, call::Answered{300, 100});
  CHECK(std::holds_alternative<verdict::Complete>(v.action));
  CHECK_FALSE(v.outage_pause);
  CHECK_FALSE(sent.lease.open());
  CHECK(rig.tokens_spent() == 400);  // the reservation of 1,000 settled at the 400 used
  CHECK(rig.requests_spent() == 1);
  CHECK(rig.budget.in_flight().in_use() == 0);
  // The first settled call replaces the defaults (800 tokens): 400 tokens, its 2 s.
  CHECK(rig.estimator.avg_tokens_per_page() == doctest::Approx(400.0));
  CHECK(rig.estimator.avg_latency_s() == doctest::Approx(2.0));
  REQUIRE(rig.order.corrections.size() == 1);
  CHECK(rig.order.corrections[0] == std::pair<fairlane::UserId, std::int64_t>{kAlice, -600});
  CHECK(rig.policy.tracked_pages() == 0);
  CHECK(rig.policy.calls_out() == 0);
}

// A provider (or a proxy in front of it) that reports absurd usage: the sum of two counts near
// INT64_MAX overflowed, and a trillion tokens made the estimator's rate about 5e-8 pages a
// second, its ETAs past what a duration holds, and the lane owe for ever. What a call is
// counted is bounded by four times its reservation.
TEST_CASE("Usage an answer reports is counted up to four times the page's reservation") {
  Rig rig;
  rig.add(kAlice, 1, 2);
  auto sent = rig.send();
  const std::int64_t huge = std::numeric_limits<std::int64_t>::max() - 5;
  CHECK(
      std::holds_alternative<verdict::Complete>(rig.end(sent, call::Answered{huge, huge}).action));
  REQUIRE(rig.order.corrections.size() == 1);
  CHECK(rig.order.corrections[0] == std::pair<fairlane::UserId, std::int64_t>{kAlice, 3'000});
  CHECK(rig.estimator.avg_tokens_per_page() == doctest::Approx(4'000.0));
  auto next = rig.send();
  (void)rig.end(next, call::Answered{1'000'000'000'000, 0});
  CHECK(rig.order.corrections[1].second <= 3'000);
}

TEST_CASE("The estimator learns answered calls in the order they were sent, not as they end") {
  Rig rig;
  rig.add(kAlice, 1, 3);
  auto first = rig.send();
  auto second = rig.send();
  auto third = rig.send();
  // The last one sent answers first, in 1 s: it waits for the two sent before it.
  (void)rig.policy.on_outcome(third.page, third.lease, CallOutcome{call::Answered{300, 100}, 1s});
  CHECK(rig.estimator.avg_latency_s() == doctest::Approx(2.0));
  // The first (5 s) is learned at once, replacing the configured 2 s; the second never
  // answers (its text could not be read), which lets the third go on: the mean of 5 and 1.
  (void)rig.policy.on_outcome(first.page, first.lease, CallOutcome{call::Answered{300, 100}, 5s});
  CHECK(rig.estimator.avg_latency_s() == doctest::Approx(5.0));
  (void)rig.policy.could_not_call(second.page, second.lease, "no text");
  CHECK(rig.estimator.avg_latency_s() == doctest::Approx(3.0));
  CHECK(rig.policy.calls_out() == 0);
}

TEST_CASE(
    "The buckets follow what an answer announces: limits, then what is left, after the settle") {
  Rig rig;
  rig.add(kAlice, 1, 1);
  auto sent = rig.send();
  const std::int64_t configured = rig.budget.tokens().capacity();
  // The answer says the account now has half the configured tokens a minute, 1,000 left.
  fairlane::Announced said;
  said.tokens_limit = configured / 2;
  said.tokens_remaining = 1'000;
  said.requests_limit = 1'000'000'000;  // above the configured: changes nothing
  (void)rig.policy.on_outcome(sent.page, sent.lease,
                              CallOutcome{call::Answered{300, 100}, 2s, said});
  CHECK(rig.budget.tokens().capacity() == configured / 2);
  CHECK(rig.budget.effective_limits().tokens_per_minute == configured / 2);
  CHECK(rig.budget.effective_limits().requests_per_minute == kRoomy.requests_per_minute);
  // The refund of the settle came first; the level then fell to what the provider said.
  CHECK(rig.budget.tokens().remaining() == 1'000);
}

TEST_CASE("A 429 pauses all dispatch until its Retry-After, and the page goes back to the head") {
  Rig rig(kRoomy, config_with(2));
  rig.add(kAlice, 1, 2);
  rig.add(kBob, 2, 1);
  auto sent = rig.send();
  const CallVerdict v = rig.end(sent, call::RateLimited{5s});
  CHECK(std::holds_alternative<verdict::Requeue>(v.action));
  // Tokens given back, the request kept: the provider counted it.
  CHECK(rig.tokens_spent() == 0);
  CHECK(rig.requests_spent() == 1);
  CHECK(rig.policy.paused_until() == rig.now() + 5s);
  CHECK_FALSE(rig.policy.may_call());
  const DispatchStep paused = rig.policy.next_step();
  REQUIRE(std::holds_alternative<step::SleepUntil>(paused));
  CHECK(std::get<step::SleepUntil>(paused).until == rig.now() + 5s);
  rig.clock.advance(5s);
  CHECK(rig.policy.may_call());
  CHECK(rig.send().page.page_id == 101);  // its place kept, ahead of Bob's turn
  CHECK(rig.policy.paused_until() == std::nullopt);
  CHECK(rig.estimator.avg_tokens_per_page() == doctest::Approx(800.0));  // nothing learnt
  CHECK(rig.order.corrections.empty());
}

TEST_CASE("Refusals spend no attempt: after a 429 and a 503 a page still has all its attempts") {
  Rig rig(kRoomy, config_with(1));  // one attempt: the first transient error fails the page
  rig.add(kAlice, 1, 1);
  auto sent = rig.send();
  CHECK(std::holds_alternative<verdict::Requeue>(rig.end(sent, call::RateLimited{1s}).action));
  rig.clock.advance(1s);
  sent = rig.send();
  CHECK(std::holds_alternative<verdict::Requeue>(rig.end(sent, call::Overloaded{1s}).action));
  rig.clock.advance(1s);
  sent = rig.send();
  CHECK(as<verdict::Fail>(rig.end(sent, call::TransientError{"reset"})).reason ==
        "gave up after 1 attempts: reset");
}

TEST_CASE(
    "A 503 without Retry-After pauses for the default pause, and a shorter pause never "
    "cuts a longer one short") {
  Rig rig;
  rig.add(kAlice, 1, 3);
  auto a = rig.send();
  auto b = rig.send();
  auto c = rig.send();
  CHECK(std::holds_alternative<verdict::Requeue>(rig.end(a, call::Overloaded{}).action));
  CHECK(rig.policy.paused_until() == rig.now() + 1s);
  CHECK(std::holds_alternative<verdict::Requeue>(rig.end(b, call::RateLimited{10s}).action));
  CHECK(rig.policy.paused_until() == rig.now() + 10s);
  rig.clock.advance(1s);
  CHECK(std::holds_alternative<verdict::Requeue>(rig.end(c, call::Overloaded{2s}).action));
  CHECK(rig.policy.paused_until() == rig.now() + 9s);
}

TEST_CASE(
    "Refusals without a Retry-After pause longer each time, doubling to backoff_max, until an "
    "answer, not for those of one burst, with a Retry-After of 0 as no hint") {
  DispatchPolicyConfig config = config_with();
  config.backoff_max = 4s;
  Rig rig(kRoomy, config);
  rig.add(kAlice, 1, 8);
  // A burst of four, all refused (529 overloaded for minutes, no Retry-After): the first
  // one's pause covers the others.
  std::vector<step::Send> out;
  for (int i = 0; i < 4; ++i) out.push_back(rig.send());
  (void)rig.end(out[0], call::Overloaded{});
  CHECK(rig.policy.paused_until() == rig.now() + 1s);
  for (std::size_t i = 1; i < 4; ++i) (void)rig.end(out[i], call::Overloaded{});
  CHECK(rig.policy.paused_until() == rig.now() + 1s);
  // Each pause that ends in another refusal is twice the last, up to backoff_max; a 429 with
  // Retry-After 0 (or a date already past) counts as none, not as no pause at all.
  for (const Clock::duration pause : {2s, 4s, 4s}) {
    rig.clock.advance_to(*rig.policy.paused_until());
    auto again = rig.send();
    (void)rig.end(again, call::RateLimited{0s});
    CHECK(rig.policy.paused_until() == rig.now() + pause);
  }
  // An answer: the provider takes calls again, and the next refusal pauses 1 s.
  rig.clock.advance_to(*rig.policy.paused_until());
  auto answered = rig.send();
  CHECK(std::holds_alternative<verdict::Complete>(
      rig.end(answered, call::Answered{300, 100}).action));
  auto refused = rig.send();
  (void)rig.end(refused, call::Overloaded{});
  CHECK(rig.policy.paused_until() == rig.now() + 1s);
  // A Retry-After the provider gave is kept as given, neither doubled nor counted.
  rig.clock.advance_to(*rig.policy.paused_until());
  refused = rig.send();
  (void)rig.end(refused, call::RateLimited{3s});
  CHECK(rig.policy.paused_until() == rig.now() + 3s);
  rig.clock.advance_to(*rig.policy.paused_until());
  refused = rig.send();
  (void)rig.end(refused, call::Overloaded{});
  CHECK(rig.policy.paused_until() == rig.now() + 2s);
}

TEST_CASE(
    "A refusal after a quiet spell longer than backoff_max pauses the default pause again, "
    "however long the pauses before it had grown") {
  DispatchPolicyConfig config = config_with(5, 3);
  config.backoff_max = 4s;
  Rig rig(kRoomy, config);
  rig.add(kAlice, 1, 1);
  // An overload that outlasts the page: its pauses grow to the cap and it gives up.
  for (const Clock::duration pause : {1s, 2s, 4s}) {
    auto refused = rig.send();
    (void)rig.end(refused, call::Overloaded{});
    CHECK(rig.policy.paused_until() == rig.now() + pause);
    rig.clock.advance_to(*rig.policy.paused_until());
  }
  auto last = rig.send();
  CHECK(std::holds_alternative<verdict::Fail>(rig.end(last, call::Overloaded{}).action));
  // Hours later, with nothing sent in between, a new page meets a refusal: a new overload,
  // paused from the default pause, not the old one's cap.
  rig.clock.advance(3h);
  rig.add(kAlice, 2, 2);
  auto refused = rig.send();
  (void)rig.end(refused, call::Overloaded{});
  CHECK(rig.policy.paused_until() == rig.now() + 1s);
  // Within backoff_max of that pause's end the overload is the same one: it doubles.
  rig.clock.advance_to(*rig.policy.paused_until() + 3s);
  refused = rig.send();
  (void)rig.end(refused, call::Overloaded{});
  CHECK(rig.policy.paused_until() == rig.now() + 2s);
  // So is a refusal sent at the pause's end that takes longer than backoff_max to come back
  // (a gateway's 503 after waiting on its upstream): it is when the call went that counts.
  rig.clock.advance_to(*rig.policy.paused_until());
  refused = rig.send();
  rig.clock.advance(10s);
  (void)rig.policy.on_outcome(refused.page, refused.lease, CallOutcome{call::Overloaded{}, 10s});
  CHECK(rig.policy.paused_until() == rig.now() + 4s);
  // And a pause the provider set (a Retry-After longer than backoff_max) is no quiet spell.
  rig.clock.advance_to(*rig.policy.paused_until());
  refused = rig.send();
  (void)rig.end(refused, call::RateLimited{30s});
  rig.clock.advance_to(*rig.policy.paused_until());
  refused = rig.send();
  (void)rig.end(refused, call::Overloaded{});
  CHECK(rig.policy.paused_until() == rig.now() + 4s);
}

TEST_CASE("A backoff_max below the default pause does not shorten a refusal's pause") {
  DispatchPolicyConfig config = config_with();
  config.backoff_max = 200ms;  // for the failed attempts' backoff
  Rig rig(kRoomy, config);
  rig.add(kAlice, 1, 2);
  auto sent = rig.send();
  (void)rig.end(sent, call::Overloaded{});
  CHECK(rig.policy.paused_until() == rig.now() + 1s);
  rig.clock.advance(1s);
  sent = rig.send();
  (void)rig.end(sent, call::Overloaded{});
  CHECK(rig.policy.paused_until() == rig.now() + 1s);
}

TEST_CASE("A page refused more than max_requeues times fails, saying how often it came back") {
  Rig rig(kRoomy, config_with(5, 3));
  rig.add(kAlice, 1, 1);
  for (int i = 1; i <= 3; ++i) {
    auto sent = rig.send();
    CHECK(std::holds_alternative<verdict::Requeue>(rig.end(sent, call::RateLimited{1s}).action));
    rig.clock.advance(1s);
  }
  auto sent = rig.send();
  const CallVerdict v = rig.end(sent, call::RateLimited{1s});
  CHECK(as<verdict::Fail>(v).reason == "gave up after 4 refusals by the provider's rate limit");
  CHECK(rig.policy.tracked_pages() == 0);
}

TEST_CASE(
    "A transient error spends an attempt: the page is held for a full-jitter backoff within "
    "the doubling ceiling, then returns to the head") {
  Rig rig(kRoomy, config_with(10));
  rig.add(kAlice, 1, 1);
  auto alice = rig.send();

  const Clock::duration ceilings[] = {1s, 2s, 4s, 8s, 16s, 32s, 60s, 60s, 60s};
  for (const Clock::duration ceiling : ceilings) {
    CAPTURE(ceiling.count());
    const WallTime wall_before = rig.wall.now();
    const CallVerdict v = rig.end(alice, call::TransientError{"the provider answered 500"});
    const auto& retry = as<verdict::Retry>(v);
    CHECK(retry.reason == "the provider answered 500");
    CHECK(retry.delay >= Clock::duration::zero());
    CHECK(retry.delay < ceiling);
    CHECK(retry.not_before == wall_before + retry.delay);
    CHECK(rig.policy.held() == 1);
    CHECK(rig.scheduler.size() == 0);
    CHECK(rig.tokens_spent() == 0);  // the failed call's tokens given back
    const DispatchStep waiting = rig.policy.next_step();
    REQUIRE(std::holds_alternative<step::Idle>(waiting));
    CHECK(std::get<step::Idle>(waiting).until == rig.now() + retry.delay);
    rig.clock.advance(retry.delay);
    alice = rig.send();
    CHECK(alice.page.page_id == 101);
    CHECK(rig.policy.held() == 0);
  }
}

TEST_CASE("Full jitter: the first backoffs spread from 0 to all of backoff_base") {
  Rig rig(BudgetLimits{}, config_with(2));
  rig.add(kAlice, 1, 50);
  rig.add(kBob, 2, 50);
  Clock::duration shortest = 1s;
  Clock::duration longest{};
  for (int i = 0; i < 100; ++i) {
    auto sent = rig.send();
    const auto& retry = as<verdict::Retry>(rig.end(sent, call::TransientError{"timeout"}));
    shortest = std::min(shortest, retry.delay);
    longest = std::max(longest, retry.delay);
    CHECK(retry.delay < 1s);
  }
  CHECK(shortest < 100ms);
  CHECK(longest > 900ms);
  CHECK(rig.policy.held() == 100);
}

TEST_CASE("The same seed draws the same backoffs") {
  const auto delays = [](std::uint64_t seed) {
    DispatchPolicyConfig config = config_with(2);
    config.seed = seed;
    Rig rig(BudgetLimits{}, config);
    rig.add(kAlice, 1, 5);
    std::vector<Clock::duration> drawn;
    for (int i = 0; i < 5; ++i) {
      auto sent = rig.send();
      drawn.push_back(as<verdict::Retry>(rig.end(sent, call::TransientError{"reset"})).delay);
    }
    return drawn;
  };
  CHECK(delays(3) == delays(3));
  CHECK(delays(3) != delays(4));
}

TEST_CASE("A page out of attempts fails with the count and the last reason") {
  Rig rig(kRoomy, config_with(2));
  rig.add(kAlice, 1, 1);
  auto sent = rig.send();
  const auto& retry = as<verdict::Retry>(rig.end(sent, call::TransientError{"first"}));
  rig.clock.advance(retry.delay);
  sent = rig.send();
  const CallVerdict v = rig.end(sent, call::TransientError{"the provider did not answer in time"});
  CHECK(as<verdict::Fail>(v).reason ==
        "gave up after 2 attempts: the provider did not answer in time");
  CHECK(rig.policy.tracked_pages() == 0);
  CHECK(rig.policy.held() == 0);
}

TEST_CASE("An unread text's backoff doubles with those returns only, not with 429s") {
  Rig rig(kRoomy, config_with(5, 100));
  rig.add(kAlice, 1, 1);
  for (int i = 0; i < 6; ++i) {  // six 429s: 64 backoff_base, were they counted
    auto sent = rig.send();
    std::ignore = as<verdict::Requeue>(rig.end(sent, call::RateLimited{1s}));
    rig.clock.advance(1s);
  }
  auto sent = rig.send();
  std::ignore = as<verdict::Requeue>(rig.policy.could_not_read(sent.page, sent.lease, "unread"));
  REQUIRE(rig.policy.held() == 1);
  rig.clock.advance(1s);  // a first such return waits less than backoff_base
  CHECK(rig.send().page.page_id == 101);
}

TEST_CASE("A page of a job cancelled while its text could not be read is forgotten") {
  Rig rig;
  rig.add(kAlice, 1, 1);
  auto sent = rig.send();
  CHECK(rig.policy.cancel_job(kAlice, 1).empty());  // its only page is out
  std::ignore = as<verdict::Requeue>(rig.policy.could_not_read(sent.page, sent.lease, "unread"));
  CHECK(rig.policy.held() == 0);
  CHECK(rig.policy.tracked_pages() == 0);
  CHECK(std::holds_alternative<step::Idle>(rig.policy.next_step()));
}

TEST_CASE("A client error fails the page at once with its reason, and gives the tokens back") {
  Rig rig;
  rig.add(kAlice, 1, 1);
  auto sent = rig.send();
  const CallVerdict v =
      rig.end(sent, call::ClientError{"the provider refused the request with 401"});
  CHECK(as<verdict::Fail>(v).reason == "the provider refused the request with 401");
  CHECK(rig.tokens_spent() == 0);
  CHECK(rig.requests_spent() == 1);
  CHECK(rig.policy.paused_until() == std::nullopt);
  CHECK(rig.policy.tracked_pages() == 0);
}

TEST_CASE("A page the model declines fails at once, its usage counted, not its reservation") {
  // A refusal comes as a 2xx with usage: the provider counted those tokens. Before, it was
  // unreadable (retried, each try billed) or, for Anthropic, done with no text.
  Rig rig;
  rig.add(kAlice, 1, 1);
  auto sent = rig.send();
  const CallVerdict v =
      rig.end(sent, call::ClientError{"the model declined the page: I can't help", 300});
  CHECK(as<verdict::Fail>(v).reason == "the model declined the page: I can't help");
  CHECK(rig.tokens_spent() == 300);
  CHECK(rig.requests_spent() == 1);
  CHECK(rig.budget.in_flight().in_use() == 0);
  CHECK(rig.policy.tracked_pages() == 0);
  // A usage past four times the reservation counts four times it, as an answer's does: a
  // trillion would have put the bucket minutes in debt for every user.
  rig.add(kAlice, 2, 1);
  auto odd = rig.send();
  (void)rig.end(odd, call::ClientError{"the model declined the page: no", 1'000'000'000'000});
  CHECK(rig.tokens_spent() == 300 + 4'000);
}

TEST_CASE("A 2xx whose answer cannot be read keeps its reservation spent and spends an attempt") {
  Rig rig;
  rig.add(kAlice, 1, 1);
  auto sent = rig.send();
  const CallVerdict v = rig.end(sent, call::Unreadable{"the provider's answer was unusable"});
  CHECK(as<verdict::Retry>(v).reason == "the provider's answer was unusable");
  CHECK(rig.tokens_spent() == 1'000);
  CHECK(rig.budget.in_flight().in_use() == 0);
  CHECK(rig.estimator.avg_tokens_per_page() == doctest::Approx(800.0));  // no usage to learn
}

TEST_CASE(
    "Unreachable: all dispatch pauses, doubling from backoff_base to backoff_max, one call "
    "probes at a time, no attempt is spent, and an answer ends the outage") {
  DispatchPolicyConfig config = config_with(1);  // a page that spent an attempt would fail
  config.backoff_base = 1s;
  config.backoff_max = 4s;
  Rig rig(kRoomy, config);
  rig.add(kAlice, 1, 8);
  std::vector<step::Send> out;
  for (int i = 0; i < 4; ++i) out.push_back(rig.send());  // the cap: 4 in flight

  // The first call back starts a pause; the others, back during it, do not extend it.
  const CallVerdict first = rig.end(out[0], call::Unreachable{"could not reach the provider"});
  CHECK(std::holds_alternative<verdict::Requeue>(first.action));
  CHECK(first.outage_pause == 1s);
  const Clock::time_point resume = rig.now() + 1s;
  rig.clock.advance(100ms);
  for (std::size_t i = 1; i < 4; ++i) {
    const CallVerdict later = rig.end(out[i], call::Unreachable{"could not reach the provider"});
    CHECK(std::holds_alternative<verdict::Requeue>(later.action));
    CHECK_FALSE(later.outage_pause);
  }
  CHECK(rig.policy.paused_until() == resume);
  CHECK(rig.policy.outage_pauses() == 1);
  CHECK(rig.scheduler.size() == 8);

  // Each pause ends with one probe; while it is out nothing else goes.
  for (const Clock::duration pause : {2s, 4s, 4s}) {
    rig.clock.advance_to(*rig.policy.paused_until());
    auto probe = rig.send();
    CHECK(probe.page.page_id == 101);
    CHECK(std::holds_alternative<step::WaitForCall>(rig.policy.next_step()));
    const CallVerdict v = rig.end(probe, call::Unreachable{"could not reach the provider"});
    CHECK(std::holds_alternative<verdict::Requeue>(v.action));
    CHECK(v.outage_pause == pause);
    CHECK(rig.policy.paused_until() == rig.now() + pause);
  }
  CHECK(rig.policy.outage_pauses() == 4);

  // The provider is back: the probe's answer ends the outage, and calls go out four at once.
  rig.clock.advance_to(*rig.policy.paused_until());
  auto probe = rig.send();
  CHECK(std::holds_alternative<verdict::Complete>(rig.end(probe, call::Answered{300, 100}).action));
  CHECK(rig.policy.outage_pauses() == 0);
  for (int i = 0; i < 4; ++i) (void)rig.send();
  CHECK(rig.policy.calls_out() == 4);
}

TEST_CASE(
    "A provider that refuses fairlane itself is an outage: paused, one probe at a time, no "
    "attempt spent, and a page that never gets through says why") {
  DispatchPolicyConfig config = config_with(1, 3);  // a page that spent an attempt would fail
  Rig rig(kRoomy, config);
  rig.add(kAlice, 1, 4);
  std::vector<step::Send> out;
  for (int i = 0; i < 4; ++i) out.push_back(rig.send());
  const std::string refused = "the provider refused the request with 401 (invalid API key)";
  CHECK(rig.end(out[0], call::Rejected{refused}).outage_pause == 1s);
  for (std::size_t i = 1; i < 4; ++i) {
    CHECK(
        std::holds_alternative<verdict::Requeue>(rig.end(out[i], call::Rejected{refused}).action));
  }
  CHECK(rig.scheduler.size() == 4);
  CallVerdict v;
  for (const Clock::duration pause : {2s, 4s}) {
    rig.clock.advance_to(*rig.policy.paused_until());
    auto probe = rig.send();
    CHECK(std::holds_alternative<step::WaitForCall>(rig.policy.next_step()));
    v = rig.end(probe, call::Rejected{refused});
    CHECK(v.outage_pause == pause);
  }
  rig.clock.advance_to(*rig.policy.paused_until());
  auto probe = rig.send();
  v = rig.end(probe, call::Rejected{refused});
  CHECK(as<verdict::Fail>(v).reason ==
        "gave up after 4 returns while the provider was refusing "
        "fairlane (" +
            refused + ")");
}

TEST_CASE("Any other outcome ends an outage too: the next pause starts again from backoff_base") {
  Rig rig;
  rig.add(kAlice, 1, 2);
  auto a = rig.send();
  CHECK(rig.end(a, call::Unreachable{"refused"}).outage_pause == 1s);
  rig.clock.advance(1s);
  a = rig.send();
  CHECK(rig.end(a, call::TransientError{"reset"}).outage_pause == std::nullopt);
  CHECK(rig.policy.outage_pauses() == 0);
  auto b = rig.send();
  CHECK(rig.end(b, call::Unreachable{"refused"}).outage_pause == 1s);
}

TEST_CASE("A page the provider is never reachable for fails after max_requeues returns") {
  DispatchPolicyConfig config = config_with(5, 3);
  config.backoff_base = 1ms;
  config.backoff_max = 1ms;
  Rig rig(kRoomy, config);
  rig.add(kAlice, 1, 1);
  CallVerdict v;
  for (int i = 0; i < 4; ++i) {
    rig.clock.advance(1ms);
    auto sent = rig.send();
    v = rig.end(sent, call::Unreachable{"could not reach the provider (refused)"});
  }
  CHECK(as<verdict::Fail>(v).reason ==
        "gave up after 4 returns while the provider was unreachable (could not reach the "
        "provider (refused))");
  CHECK(rig.policy.outage_pauses() == 4);
}

// ---- calls that were not made --------------------------------------------------------------

TEST_CASE(
    "A pause that begins while a dispatch is recorded stops its call: the page goes back "
    "to the head, nothing spent but the request") {
  Rig rig;
  rig.add(kAlice, 1, 3);
  auto first = rig.send();
  auto second = rig.send();
  (void)rig.end(first, call::RateLimited{2s});
  REQUIRE_FALSE(rig.policy.may_call());
  rig.policy.not_called(second.page, second.lease, true);
  CHECK_FALSE(second.lease.open());
  CHECK(rig.tokens_spent() == 0);
  CHECK(rig.requests_spent() == 2);
  CHECK(rig.policy.calls_out() == 0);
  CHECK(rig.scheduler.size() == 3);
  rig.clock.advance(2s);
  CHECK(rig.send().page.page_id == 101);
  CHECK(rig.send().page.page_id == 102);
}

TEST_CASE("A call not made for a stop leaves its page out of the lane") {
  Rig rig;
  rig.add(kAlice, 1, 1);
  auto sent = rig.send();
  rig.policy.not_called(sent.page, sent.lease, false);
  CHECK(rig.scheduler.size() == 0);
  CHECK(rig.policy.calls_out() == 0);
  CHECK(rig.tokens_spent() == 0);
}

TEST_CASE("A page that cannot be prepared for what it holds spends an attempt") {
  Rig rig(kRoomy, config_with(1));
  rig.add(kAlice, 1, 1);
  auto sent = rig.send();
  const CallVerdict v =
      rig.policy.could_not_call(sent.page, sent.lease, "its text could not be read");
  CHECK(as<verdict::Fail>(v).reason == "gave up after 1 attempts: its text could not be read");
  CHECK(rig.tokens_spent() == 0);
  CHECK(rig.policy.calls_out() == 0);
}

TEST_CASE("A page whose text the store cannot give now spends no attempt and waits its turn") {
  Rig rig(kRoomy, config_with(1, 2));  // a single attempt spent would fail it
  rig.add(kAlice, 1, 2);
  const std::string why = "its text could not be read: lost the connection";
  auto sent = rig.send();
  CHECK(sent.page.page_id == 101);
  std::ignore = as<verdict::Requeue>(rig.policy.could_not_read(sent.page, sent.lease, why));
  CHECK(rig.policy.held() == 1);
  CHECK(rig.policy.calls_out() == 0);
  CHECK(rig.tokens_spent() == 0);
  CHECK_FALSE(rig.policy.paused_until().has_value());  // the other pages go on meanwhile
  auto other = rig.send();
  CHECK(other.page.page_id == 102);
  std::ignore = rig.end(other, call::Answered{.input_tokens = 500, .output_tokens = 100});

  // Held for a full-jitter backoff as for a first attempt, [0, backoff_base); then at the head.
  rig.clock.advance(1s);
  auto again = rig.send();
  CHECK(again.page.page_id == 101);
  std::ignore = as<verdict::Requeue>(rig.policy.could_not_read(again.page, again.lease, why));
  CHECK(rig.policy.held() == 1);
  rig.clock.advance(2s);  // its second return: [0, 2 backoff_base)
  again = rig.send();
  CHECK(again.page.page_id == 101);
  // Its returns are counted: past max_requeues it fails, saying why.
  CHECK(as<verdict::Fail>(rig.policy.could_not_read(again.page, again.lease, why)).reason ==
        "gave up after 3 returns while its text could not be read: lost the connection");
  CHECK(rig.policy.tracked_pages() == 0);
  CHECK(rig.policy.held() == 0);
}

// ---- cancellations -------------------------------------------------------------------------

TEST_CASE("Cancelling a job: its queued pages leave, and a page out is forgotten as it returns") {
  Rig rig;
  rig.add(kAlice, 1, 3);
  auto sent = rig.send();
  const auto removed = rig.policy.cancel_job(kAlice, 1);
  CHECK(removed.size() == 2);
  CHECK(rig.policy.cancelled_jobs() == 1);
  CHECK(rig.policy.tracked_pages() == 1);
  const CallVerdict v = rig.end(sent, call::RateLimited{1s});
  CHECK(std::holds_alternative<verdict::Requeue>(v.action));  // the store cancels it
  CHECK(rig.scheduler.size() == 0);
  CHECK(rig.policy.tracked_pages() == 0);
  CHECK(rig.policy.cancelled_jobs() == 0);
}

TEST_CASE("A page held back for a backoff is forgotten at its release when its job was cancelled") {
  Rig rig;
  rig.add(kAlice, 1, 1);
  auto sent = rig.send();
  const auto& retry = as<verdict::Retry>(rig.end(sent, call::TransientError{"reset"}));
  const Clock::duration delay = retry.delay;
  CHECK(rig.policy.cancel_job(kAlice, 1).empty());
  CHECK(rig.policy.cancelled_jobs() == 1);
  rig.clock.advance(delay);
  CHECK(std::holds_alternative<step::Idle>(rig.policy.next_step()));
  CHECK(rig.policy.held() == 0);
  CHECK(rig.policy.tracked_pages() == 0);
  CHECK(rig.policy.cancelled_jobs() == 0);
}

TEST_CASE("A page no longer queued when its dispatch is recorded is withdrawn and forgotten") {
  Rig rig;
  rig.add(kAlice, 1, 1);
  auto sent = rig.send();
  rig.policy.withdrawn(sent.page, sent.lease);
  CHECK_FALSE(sent.lease.open());
  CHECK(rig.tokens_spent() == 0);
  CHECK(rig.policy.tracked_pages() == 0);
  CHECK(rig.policy.calls_out() == 0);
}

// The page was charged to its lane when it was taken; no call was made for it, so its user's
// next page keeps the turn. Before, the lane paid for it, and its next turn came a page later.
TEST_CASE("A page withdrawn before its call gives its lane back what it was charged") {
  Rig rig;
  rig.add(kAlice, 1, 1);
  rig.add(kAlice, 2, 2);
  rig.add(kBob, 3, 2);
  auto withdrawn = rig.send();
  REQUIRE(withdrawn.page.page_id == 101);
  rig.policy.withdrawn(withdrawn.page, withdrawn.lease);
  CHECK(rig.send().page.page_id == 201);
  CHECK(rig.send().page.page_id == 301);
}

TEST_CASE("What is left of a pause, and of a job's pages held back, on the policy's clock") {
  Rig rig(kRoomy, config_with(5));
  rig.add(kAlice, 1, 2);
  rig.add(kBob, 2, 1);
  CHECK(rig.policy.paused_for() == Clock::duration::zero());
  auto first = rig.send();
  auto second = rig.send();
  (void)rig.end(first, call::TransientError{"reset"});
  const auto held = rig.policy.held_back(1);
  REQUIRE(held.has_value());
  CHECK(*held <= 1s);  // the first backoff: up to backoff_base
  CHECK_FALSE(rig.policy.held_back(2).has_value());
  (void)rig.end(second, call::RateLimited{120s});
  CHECK(rig.policy.paused_for() == 120s);
  rig.clock.advance(20s);
  CHECK(rig.policy.paused_for() == 100s);
  rig.clock.advance(200s);
  CHECK(rig.policy.paused_for() == Clock::duration::zero());
}

// ---- start and stop ------------------------------------------------------------------------

TEST_CASE(
    "At start a page whose backoff still runs is held until its not_before, with its "
    "attempts") {
  Rig rig(kRoomy, config_with(3));
  const QueuedPage page{101, 1, kAlice, 1'000};
  rig.policy.restore(page, 2, rig.wall.now() + 3s);
  rig.policy.restore(QueuedPage{102, 1, kAlice, 1'000}, 0, rig.wall.now() - 3s);  // passed
  CHECK(rig.policy.held() == 1);
  CHECK(rig.send().page.page_id == 102);
  const DispatchStep waiting = rig.policy.next_step();
  REQUIRE(std::holds_alternative<step::Idle>(waiting));
  CHECK(std::get<step::Idle>(waiting).until == rig.now() + 3s);
  rig.clock.advance(3s);
  auto sent = rig.send();
  CHECK(sent.page.page_id == 101);
  CHECK(rig.policy.first_call_wait(101) == std::nullopt);  // it had been called before
  const CallVerdict v = rig.end(sent, call::TransientError{"reset"});
  CHECK(as<verdict::Fail>(v).reason == "gave up after 3 attempts: reset");
}

TEST_CASE("A held page's release comes before a bucket's refill when it is sooner") {
  Rig rig(BudgetLimits{.requests_per_minute = 60, .tokens_per_minute = 0, .max_in_flight = 0});
  rig.policy.restore(QueuedPage{201, 2, kBob, 1'000}, 1, rig.wall.now() + 500ms);
  rig.add(kAlice, 1, 61);
  for (int i = 0; i < 60; ++i) (void)rig.send();
  const DispatchStep next = rig.policy.next_step();
  REQUIRE(std::holds_alternative<step::SleepUntil>(next));
  CHECK(std::get<step::SleepUntil>(next).until == rig.now() + 500ms);
}

TEST_CASE("Stopping lets the held pages go") {
  Rig rig;
  rig.add(kAlice, 1, 1);
  auto sent = rig.send();
  (void)rig.end(sent, call::TransientError{"reset"});
  REQUIRE(rig.policy.held() == 1);
  rig.policy.drop_held();
  CHECK(rig.policy.held() == 0);
  rig.clock.advance(60s);
  CHECK(std::holds_alternative<step::Idle>(rig.policy.next_step()));
  CHECK(rig.scheduler.size() == 0);
}

TEST_CASE(
    "A previous process's calls out hold places until dispatch plus twice the longest "
    "recent call, at most the call timeout") {
  Rig rig;  // a cap of 4
  const WallTime now = rig.wall.now();
  SUBCASE("with recent calls of at most 2 s") {
    const auto held = rig.policy.inherit_calls_out({now - 1s, now - 10s, now}, 2s);
    REQUIRE(held.size() == 2);  // the one sent 10 s ago has ended
    CHECK(held[0].left == 3s);
    CHECK(held[1].left == 4s);
    CHECK(rig.budget.in_flight().in_use() == 2);
  }
  SUBCASE("with no recent call: the timeout") {
    const auto held = rig.policy.inherit_calls_out({now - 20s}, std::nullopt);
    REQUIRE(held.size() == 1);
    CHECK(held[0].left == 100s);
  }
  SUBCASE("with calls slower than half the timeout: the timeout") {
    const auto held = rig.policy.inherit_calls_out({now}, 90s);
    REQUIRE(held.size() == 1);
    CHECK(held[0].left == 120s);
  }
  SUBCASE("more calls out than the cap: the cap is full") {
    const auto held = rig.policy.inherit_calls_out(std::vector<WallTime>(6, now), 2s);
    CHECK(held.size() == 4);
    CHECK(rig.budget.in_flight().full());
    const DispatchStep next = [&] {
      rig.add(kAlice, 1, 1);
      return rig.policy.next_step();
    }();
    CHECK(std::holds_alternative<step::WaitForCall>(next));
  }
}
