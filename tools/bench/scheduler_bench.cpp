// Benchmarks of the fair scheduler, estimator and door at scale. Targets: estimate_new at
// 10,000 lanes <= 20 microseconds; next page O(1) whatever the number of lanes; a job's
// place O(log jobs in its lane) (docs/performance.md).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <random>
#include <vector>

#include "core/fake_clock.hpp"
#include "fairlane/core/budget.hpp"
#include "fairlane/core/door.hpp"
#include "fairlane/core/estimator.hpp"
#include "fairlane/core/fair_scheduler.hpp"
#include "fairlane/core/promise_order.hpp"

namespace {

using fairlane::FairScheduler;
using fairlane::QueuedPage;

constexpr fairlane::BudgetLimits kLab{
    .requests_per_minute = 1'500, .tokens_per_minute = 300'000, .max_in_flight = 200};

// `lanes` users with 1 to 200 queued pages of 800 tokens; one user in ten has weight 2,
// one in a hundred weight 5.
void fill(FairScheduler& scheduler, std::int64_t lanes) {
  std::mt19937_64 rng(1);
  fairlane::PageId page = 0;
  for (fairlane::UserId user = 1; user <= lanes; ++user) {
    if (user % 100 == 0) {
      scheduler.set_weight(user, 5);
    } else if (user % 10 == 0) {
      scheduler.set_weight(user, 2);
    }
    const auto pages = static_cast<std::int64_t>(1 + rng() % 200);
    for (std::int64_t i = 0; i < pages; ++i) scheduler.add(QueuedPage{++page, user, user, 800});
  }
}

void BM_EstimateNew(benchmark::State& state) {
  FairScheduler scheduler;
  fill(scheduler, state.range(0));
  const fairlane::Estimator estimator(scheduler, fairlane::EstimatorConfig{.limits = kLab});
  fairlane::UserId user = 1;
  for (auto _ : state) {
    benchmark::DoNotOptimize(estimator.estimate_new(user, 100));
    user = user % state.range(0) + 1;
  }
}
BENCHMARK(BM_EstimateNew)->Arg(100)->Arg(10'000);

void BM_DoorAdmit(benchmark::State& state) {
  FairScheduler scheduler;
  fill(scheduler, state.range(0));
  const fairlane::Estimator estimator(scheduler, fairlane::EstimatorConfig{.limits = kLab});
  const fairlane::Door door(scheduler, estimator,
                            fairlane::DoorConfig{.tokens_per_minute = kLab.tokens_per_minute});
  const std::vector<std::int64_t> pages(100, 800);
  fairlane::UserId user = 1;
  for (auto _ : state) {
    benchmark::DoNotOptimize(door.admit(user, pages));
    user = user % state.range(0) + 1;
  }
}
BENCHMARK(BM_DoorAdmit)->Arg(10'000);

// Take a page and add it back at the tail: the scheduler stays the same size, so each
// iteration is one next-page decision at that many lanes.
void BM_TakeNext(benchmark::State& state) {
  FairScheduler scheduler;
  fill(scheduler, state.range(0));
  for (auto _ : state) {
    auto page = scheduler.take();
    scheduler.add(*page);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TakeNext)->Arg(10)->Arg(10'000)->Arg(100'000);

// BM_TakeNext through the service's PromiseOrder: every lane's job promised a finish an hour
// away (held, so nothing is at risk), 1 ms of the FakeClock an iteration, so a review (the
// 64 earliest promises projected again) falls due every 1,000 decisions. Against
// BM_TakeNext at the same size in the same run: what keeping promises adds to a decision.
void BM_PromiseOrderTakeNext(benchmark::State& state) {
  FairScheduler scheduler;
  fill(scheduler, state.range(0));
  const fairlane::Estimator estimator(scheduler, fairlane::EstimatorConfig{.limits = kLab});
  fairlane::FakeClock clock;
  fairlane::PromiseOrder order(scheduler, estimator, clock);
  for (fairlane::UserId user = 1; user <= state.range(0); ++user) {
    order.promise(user, user, clock.now() + std::chrono::hours(1));
  }
  for (auto _ : state) {
    clock.advance(std::chrono::milliseconds(1));
    benchmark::DoNotOptimize(order.peek());
    order.add(order.take());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PromiseOrderTakeNext)->Arg(10'000)->Arg(100'000);

// One lane holding `jobs` queued jobs of one page each; the place of its last job (the most
// jobs ahead of it). What every job object pays: a job view, a list entry, a live event.
void BM_JobPlace(benchmark::State& state) {
  FairScheduler scheduler;
  const fairlane::JobId jobs = state.range(0);
  for (fairlane::JobId job = 1; job <= jobs; ++job) scheduler.add(QueuedPage{job, job, 1, 800});
  for (auto _ : state) benchmark::DoNotOptimize(scheduler.job_place(1, jobs));
}
BENCHMARK(BM_JobPlace)->Arg(10)->Arg(1'000)->Arg(10'000);

// Estimator::job at 10,000 lanes and 99,991 queued jobs: user 1 holds 10,000 jobs of one
// page, each of the other 9,999 users 9 jobs of 1 to 10 pages. Asked for user 1's last job.
void BM_EstimatorJob(benchmark::State& state) {
  FairScheduler scheduler;
  std::mt19937_64 rng(1);
  fairlane::PageId page = 0;
  fairlane::JobId job = 0;
  for (int i = 0; i < 10'000; ++i) scheduler.add(QueuedPage{++page, ++job, 1, 800});
  const fairlane::JobId last = job;
  for (fairlane::UserId user = 2; user <= 10'000; ++user) {
    for (int j = 0; j < 9; ++j) {
      ++job;
      const auto pages = static_cast<std::int64_t>(1 + rng() % 10);
      for (std::int64_t i = 0; i < pages; ++i) scheduler.add(QueuedPage{++page, job, user, 800});
    }
  }
  const fairlane::Estimator estimator(scheduler, fairlane::EstimatorConfig{.limits = kLab});
  for (auto _ : state) benchmark::DoNotOptimize(estimator.job(1, last));
}
BENCHMARK(BM_EstimatorJob);

// The door as the service runs it, at 10,000 lanes and 100,000 queued jobs (ten a user),
// with a Budget and arrivals in every slot of the window, so every estimate also weighs the
// competing arrivals (9 ended slots x 42 buckets).
void BM_DoorAdmitWithArrivals(benchmark::State& state) {
  fairlane::FakeClock clock;
  fairlane::Budget budget(clock, kLab);
  FairScheduler scheduler;
  fairlane::Estimator estimator(scheduler, fairlane::EstimatorConfig{.limits = kLab}, &budget,
                                &clock);
  std::mt19937_64 rng(1);
  fairlane::PageId page = 0;
  fairlane::JobId job = 0;
  for (fairlane::UserId user = 1; user <= 10'000; ++user) {
    for (int j = 0; j < 10; ++j) {
      ++job;
      const auto pages = static_cast<std::int64_t>(1 + rng() % 10);
      estimator.record_arrival(user, pages);
      for (std::int64_t i = 0; i < pages; ++i) scheduler.add(QueuedPage{++page, job, user, 800});
    }
    if (user % 1'000 == 0) clock.advance(std::chrono::seconds(30));  // the next slot
  }
  clock.advance(std::chrono::seconds(30));
  const fairlane::Door door(scheduler, estimator,
                            fairlane::DoorConfig{.tokens_per_minute = kLab.tokens_per_minute});
  const std::vector<std::int64_t> pages(100, 800);
  fairlane::UserId user = 1;
  for (auto _ : state) {
    benchmark::DoNotOptimize(door.admit(user, pages));
    user = user % 10'000 + 1;
  }
}
BENCHMARK(BM_DoorAdmitWithArrivals);

}  // namespace
