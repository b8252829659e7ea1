#include "fairlane/core/budget.hpp"

#include <algorithm>
#include <cassert>
#include <utility>

namespace fairlane {

Budget::Budget(const Clock& clock, const BudgetLimits& limits)
    : clock_(clock),
      limits_(limits),
      requests_(clock, limits.requests_per_minute),
      in_flight_(limits.max_in_flight),
      tokens_(clock, limits.tokens_per_minute) {}

Admission Budget::admit(std::int64_t estimated_tokens) {
  estimated_tokens = std::max<std::int64_t>(estimated_tokens, 0);
  // One clock read for the whole decision: every check sees the same instant.
  const Clock::time_point now = clock_.now();
  // Too large for the configured capacity only: a page above a lower announced limit waits
  // for a full bucket instead (the announcement may be temporary; refusing the page for
  // it would fail work the provider will take again).
  if (!tokens_.wait_at(estimated_tokens, now)) {
    return TooLarge{estimated_tokens, tokens_.configured_capacity()};
  }
  // It waits for its headroom too, but never for more than a full bucket.
  const std::int64_t needed = std::max(
      estimated_tokens, std::min(estimated_tokens + limits_.token_headroom, tokens_.capacity()));
  const auto tokens_wait = tokens_.wait_at(needed, now);
  // The requests bucket's capacity is at least 1 when limited, so one request always fits
  // eventually.
  const Clock::duration requests_wait = *requests_.wait_at(1, now);

  // Every check is made before anything is taken: a refusal holds no capacity. One wait
  // covers both buckets; the limit named is the one holding the call back longest.
  const Clock::duration wait = std::max(requests_wait, *tokens_wait);
  if (wait > Clock::duration::zero()) {
    return Wait{wait, *tokens_wait > requests_wait ? Limit::tokens : Limit::requests};
  }
  if (in_flight_.full()) return Wait{wait, Limit::concurrency};

  // All three fit at `now`, and nothing else runs in between (single thread), so none of
  // these can fail.
  [[maybe_unused]] const bool took_request = requests_.take_at(1, now);
  auto permit = in_flight_.try_acquire(now);
  auto reservation = tokens_.reserve_at(estimated_tokens, now);
  assert(took_request && permit && reservation);
  return Lease(std::move(*reservation), std::move(*permit));
}

BudgetLimits Budget::effective_limits() const {
  return BudgetLimits{.requests_per_minute = requests_.capacity(),
                      .tokens_per_minute = tokens_.capacity(),
                      .max_in_flight = limits_.max_in_flight,
                      .token_headroom = limits_.token_headroom};
}

void Budget::follow_announced(std::optional<std::int64_t> requests_limit,
                              std::optional<std::int64_t> tokens_limit) {
  if (requests_limit) requests_.limit_to(*requests_limit);
  if (tokens_limit) tokens_.limit_to(*tokens_limit);
}

std::int64_t retry_after_seconds(Clock::duration wait) {
  constexpr std::int64_t kNanosPerSecond = 1'000'000'000;
  const std::int64_t nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count();
  if (nanos <= 0) return 1;
  return nanos / kNanosPerSecond + (nanos % kNanosPerSecond != 0 ? 1 : 0);
}

}  // namespace fairlane
