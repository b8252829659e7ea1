// Provider: the simulator's model of the provider. It enforces its own limits with a Budget
// of its own (both providers document token-bucket accounting: counted on arrival,
// corrected on completion) and draws each call's latency; both may change during a run
// (scenario provider.changes), which fairlane is not told of.
//
// A change takes effect at the first call the provider sees at or after its time. The new
// limits get a budget of their own, whose buckets hold no more than the old ones had left;
// the calls still out settle against the budget that admitted them (their refunds are not
// carried over), and still count against the new in-flight cap until they end.
//
// Thread safety: none; it lives on the simulation's thread, like fairlane's core.
#pragma once

#include <cstdint>
#include <deque>
#include <random>

#include "fairlane/core/admission.hpp"
#include "fairlane/core/budget.hpp"
#include "fairlane/core/clock.hpp"
#include "scenario.hpp"

namespace fairlane::sim {

class Provider {
 public:
  // `clock` and `model` must outlive the provider.
  Provider(const Clock& clock, const ProviderModel& model);

  // What the provider answers to a call of `tokens` (input + max_tokens) now: a Lease, or
  // the limit it refuses for. Applies the changes that are due first.
  [[nodiscard]] Admission admit(std::int64_t tokens);

  // One call's latency, drawn from the model at the latency scale now, at least 0.
  [[nodiscard]] double latency_s(std::mt19937_64& rng) const;

  [[nodiscard]] const BudgetLimits& limits() const { return budgets_.back().limits(); }
  // What its buckets hold now, as its rate-limit headers' "remaining" would say.
  [[nodiscard]] const Budget& budget() const { return budgets_.back(); }
  [[nodiscard]] double latency_scale() const { return latency_scale_; }

 private:
  void apply_due_changes();
  // Calls admitted by the budgets of earlier limits that have not ended.
  [[nodiscard]] std::int64_t earlier_in_flight() const;

  const Clock& clock_;
  const ProviderModel& model_;
  std::deque<Budget> budgets_;  // the one in force last; the others settle calls still out
  std::size_t next_change_ = 0;
  double latency_scale_ = 1.0;
};

}  // namespace fairlane::sim
