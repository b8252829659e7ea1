// Budget: the provider's three limits, composed. A page is admitted only when all three
// allow it, checked in the order cheapest to undo first:
//   1. the requests bucket (RPM), cost 1;
//   2. the in-flight cap (a permit, returned when the call ends);
//   3. the tokens bucket (TPM), cost = estimated input tokens + max_tokens.
// The checks are made before anything is taken, so a refusal holds no capacity at all: a
// page refused for tokens has not spent a request, one refused for concurrency holds no
// token reservation. See admission.hpp for the answers.
//
// The provider may announce lower limits than the configured ones (follow_announced): the
// buckets then refill at min(configured, announced), back up to the configured limits when
// it announces more, never above them. effective_limits() are the limits in force now.
//
// Thread safety: none, by design. fairlane's core is single-threaded: only the io_context
// thread touches a Budget and its leases. Time comes only from the injected Clock.
#pragma once

#include <cstdint>
#include <optional>

#include "fairlane/core/admission.hpp"
#include "fairlane/core/clock.hpp"
#include "fairlane/core/in_flight_cap.hpp"
#include "fairlane/core/token_bucket.hpp"

namespace fairlane {

// The provider's limits; 0 means unlimited.
struct BudgetLimits {
  std::int64_t requests_per_minute = 0;
  std::int64_t tokens_per_minute = 0;
  std::int64_t max_in_flight = 0;
  // Tokens a call leaves unspent in the tokens bucket: a cost n is admitted once n +
  // token_headroom fit (a cost within token_headroom of the capacity, once the bucket is
  // full), and n is what it reserves. The provider counts its refill from when our calls
  // arrive, we from when we send them; a call that arrives sooner after the first of a burst
  // than it was sent finds the provider's bucket behind ours by the refill of that
  // difference. fairlane serve keeps 250 ms of refill (TPM / 240); 0 keeps nothing (the
  // stand-in, which models the provider's own bucket).
  std::int64_t token_headroom = 0;

  // The limits fairlane serve keeps for a provider's: its own, with 250 ms of the token
  // refill as headroom. The simulator uses the same, so that it runs the budget served.
  [[nodiscard]] static BudgetLimits served(std::int64_t requests_per_minute,
                                           std::int64_t tokens_per_minute,
                                           std::int64_t max_in_flight) {
    return {requests_per_minute, tokens_per_minute, max_in_flight, tokens_per_minute / 240};
  }
};

class Budget {
 public:
  // Throws std::invalid_argument for a limit out of range (a configuration bug).
  // `clock` must outlive the budget.
  Budget(const Clock& clock, const BudgetLimits& limits);

  // Leases point into the budget, so it stays where it was built.
  Budget(const Budget&) = delete;
  Budget& operator=(const Budget&) = delete;

  // Admits one provider call whose tokens are estimated at `estimated_tokens` (negative
  // counts as 0): a Lease, a Wait, or TooLarge. Only a Lease takes capacity.
  [[nodiscard]] Admission admit(std::int64_t estimated_tokens);

  // The configured limits, as the budget was built.
  [[nodiscard]] const BudgetLimits& limits() const { return limits_; }
  // The limits in force now: the configured ones, with each bucket's effective capacity
  // (lower than configured while the provider announces less). The in-flight cap is the
  // configured one: providers announce no such limit.
  [[nodiscard]] BudgetLimits effective_limits() const;

  // Follows the limits a provider's response announced, for the requests and the tokens
  // bucket (TokenBucket::limit_to): a limit below the configured one lowers the bucket's
  // capacity and refill to it, a higher one raises them back, never above the configured
  // one. An absent limit, or one <= 0, leaves its bucket as it is.
  void follow_announced(std::optional<std::int64_t> requests_limit,
                        std::optional<std::int64_t> tokens_limit);

  [[nodiscard]] TokenBucket& requests() { return requests_; }
  [[nodiscard]] const TokenBucket& requests() const { return requests_; }
  [[nodiscard]] TokenBucket& tokens() { return tokens_; }
  [[nodiscard]] const TokenBucket& tokens() const { return tokens_; }
  [[nodiscard]] const InFlightCap& in_flight() const { return in_flight_; }
  // For places held by calls the budget did not admit (a previous process's, still out).
  [[nodiscard]] InFlightCap& in_flight() { return in_flight_; }
  // The clock the buckets refill on and calls are sent by (InFlightCap::mean_sent).
  [[nodiscard]] const Clock& clock() const { return clock_; }

 private:
  // Constant after construction.
  const Clock& clock_;
  const BudgetLimits limits_;
  // Only touched on the owning thread.
  TokenBucket requests_;
  InFlightCap in_flight_;
  TokenBucket tokens_;
};

// The Retry-After a client is given for a wait: whole seconds rounded up, at least 1.
// Rounding down would invite it back before the budget exists, and 0 means "now".
[[nodiscard]] std::int64_t retry_after_seconds(Clock::duration wait);

}  // namespace fairlane
