#include "provider.hpp"

#include <algorithm>

#include "distribution.hpp"

namespace fairlane::sim {

Provider::Provider(const Clock& clock, const ProviderModel& model) : clock_(clock), model_(model) {
  budgets_.emplace_back(clock_, BudgetLimits{model.requests_per_minute, model.tokens_per_minute,
                                             model.max_in_flight});
}

void Provider::apply_due_changes() {
  const double now_s = std::chrono::duration<double>(clock_.now() - Clock::time_point{}).count();
  while (next_change_ < model_.changes.size() && model_.changes[next_change_].at_s <= now_s) {
    const ProviderChange& change = model_.changes[next_change_++];
    const Budget& old = budgets_.back();
    BudgetLimits limits = old.limits();
    limits.requests_per_minute = change.requests_per_minute.value_or(limits.requests_per_minute);
    limits.tokens_per_minute = change.tokens_per_minute.value_or(limits.tokens_per_minute);
    limits.max_in_flight = change.max_in_flight.value_or(limits.max_in_flight);
    latency_scale_ = change.latency_scale.value_or(latency_scale_);
    const std::int64_t requests_left = old.requests().remaining();
    const std::int64_t tokens_left = old.tokens().remaining();
    const bool requests_limited = !old.requests().unlimited();
    const bool tokens_limited = !old.tokens().unlimited();
    Budget& next = budgets_.emplace_back(clock_, limits);
    // A provider that lowers its limits does not hand out a fresh minute's worth at once.
    if (requests_limited) next.requests().sync_down(requests_left);
    if (tokens_limited) next.tokens().sync_down(tokens_left);
  }
  // Budgets whose calls have all ended are no longer needed (the one in force stays).
  while (budgets_.size() > 1 && budgets_.front().in_flight().in_use() == 0) budgets_.pop_front();
}

std::int64_t Provider::earlier_in_flight() const {
  std::int64_t calls = 0;
  for (std::size_t i = 0; i + 1 < budgets_.size(); ++i) calls += budgets_[i].in_flight().in_use();
  return calls;
}

Admission Provider::admit(std::int64_t tokens) {
  apply_due_changes();
  Budget& budget = budgets_.back();
  const std::int64_t cap = budget.limits().max_in_flight;
  const std::int64_t earlier = earlier_in_flight();
  if (cap > 0 && earlier > 0 && earlier + budget.in_flight().in_use() >= cap) {
    // Refused for concurrency only when both buckets would take it, as Budget::admit does.
    const auto tokens_wait = budget.tokens().wait_for(tokens);
    const auto requests_wait = budget.requests().wait_for(1);
    if (tokens_wait && *tokens_wait == Clock::duration::zero() && requests_wait &&
        *requests_wait == Clock::duration::zero()) {
      return Wait{Clock::duration::zero(), Limit::concurrency};
    }
  }
  return budget.admit(tokens);
}

double Provider::latency_s(std::mt19937_64& rng) const {
  return std::max(0.0, sample(model_.latency_s, rng) * latency_scale_);
}

}  // namespace fairlane::sim
