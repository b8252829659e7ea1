// Benchmarks of the budget core's hot path: one admission and its settlement, as the
// dispatch loop does once per page. Target: median <= 100 ns per admission
// (docs/performance.md records the figures and the command).
#include <benchmark/benchmark.h>

#include <chrono>
#include <variant>

#include "core/fake_clock.hpp"
#include "fairlane/core/budget.hpp"
#include "fairlane/core/token_bucket.hpp"

namespace {

using fairlane::Budget;
using fairlane::BudgetLimits;
using fairlane::Lease;

// The lab's provider limits: 1,500 RPM, 300,000 TPM, 200 in flight, ~800 tokens a page.
constexpr BudgetLimits kLabLimits{
    .requests_per_minute = 1'500, .tokens_per_minute = 300'000, .max_in_flight = 200};
constexpr std::int64_t kPageTokens = 800;

// admit + settle with time moving on a FakeClock: every admission succeeds, and each one
// refills all buckets first (a tenth of a second passes between pages).
void BM_AdmitSettle_FakeClock(benchmark::State& state) {
  fairlane::FakeClock clock;
  Budget budget(clock, kLabLimits);
  for (auto _ : state) {
    clock.advance(std::chrono::milliseconds(100));
    auto admission = budget.admit(kPageTokens);
    auto* lease = std::get_if<Lease>(&admission);
    if (lease == nullptr) {
      state.SkipWithError("a page was not admitted");
      break;
    }
    lease->settle(kPageTokens / 2);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AdmitSettle_FakeClock);

// admit + settle on the real steady clock (what production pays, clock reads included).
// Each call settles with no usage, so the tokens come back, and the requests bucket
// (10^10 a minute, about 1.7 x 10^8 a second) refills far faster than admissions spend it.
void BM_AdmitSettle_SteadyClock(benchmark::State& state) {
  const fairlane::SteadyClock clock;
  Budget budget(clock, BudgetLimits{.requests_per_minute = fairlane::TokenBucket::kMaxCapacity,
                                    .tokens_per_minute = fairlane::TokenBucket::kMaxCapacity,
                                    .max_in_flight = 200});
  for (auto _ : state) {
    auto admission = budget.admit(kPageTokens);
    auto* lease = std::get_if<Lease>(&admission);
    if (lease == nullptr) {
      state.SkipWithError("a page was not admitted");
      break;
    }
    lease->settle(0);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AdmitSettle_SteadyClock);

// A refusal: the tokens bucket is empty, so admit computes the exact wait and takes nothing.
void BM_AdmitRefused(benchmark::State& state) {
  fairlane::FakeClock clock;
  Budget budget(clock, kLabLimits);
  std::get<Lease>(budget.admit(kLabLimits.tokens_per_minute)).settle(kLabLimits.tokens_per_minute);
  for (auto _ : state) {
    auto admission = budget.admit(kPageTokens);
    benchmark::DoNotOptimize(admission);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AdmitRefused);

}  // namespace

BENCHMARK_MAIN();
