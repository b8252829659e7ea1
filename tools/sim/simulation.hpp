// Simulation: one run of a scenario on virtual time, driving fairlane's real core (Budget,
// FairScheduler, Estimator, Door) and the service's own DispatchPolicy against a provider
// model that enforces its own limits with its own budget, and measuring what the figures of
// docs/performance.md ask for.
//
// Two sides in simulation.cpp: the provider model (SimulatedProvider: its limits, latency
// and output tokens) and the dispatch side, which asks the policy for its next step after
// every batch of events at one instant (send a page, wait for the exact refill time, wait
// for a call to end) and hands it each call's outcome, exactly as the service's Dispatcher
// does. A provider refusal counts as a violation (it must never happen); the policy treats
// it as the service treats a 429 (a 503 over the in-flight cap) without Retry-After: all
// dispatch pauses for a second and the page returns to the head of its lane.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fairlane/core/budget.hpp"
#include "scenario.hpp"

namespace fairlane::sim {

struct BookResult {
  std::string user;
  double arrival_s = 0.0;
  std::int64_t pages = 0;
  std::int64_t input_tokens = 0;          // per page
  double finish_s = 0.0;                  // when its last page's answer came back
  bool finished = false;                  // false: some page never ended (a broken run)
  std::optional<double> predicted_eta_s;  // what the door promised (fair scheduler only)
  std::optional<double> own_s;            // the door's estimate of its time alone (fair only)
  std::optional<double> ideal_s;          // completion time under fluid fair sharing
  // Revised ETAs (core/promise_watch, as the service revises them): when the promise was
  // first revised, and the last revision's finish, both in seconds after the arrival.
  std::optional<double> first_revised_s;
  std::optional<double> revised_eta_s;
  [[nodiscard]] double completion_s() const { return finish_s - arrival_s; }
};

struct Utilisation {
  double requests = 0.0;     // of RPM
  double tokens = 0.0;       // of TPM (provider-counted tokens)
  double concurrency = 0.0;  // of max in flight (time average)
  double measured_s = 0.0;   // the steady backlogged time it was measured over
};

struct Metrics {
  SchedulerKind scheduler = SchedulerKind::fair;
  std::vector<BookResult> books;                 // accepted books, in arrival order
  std::map<std::string, std::int64_t> refusals;  // busy, user_queue_full, request_too_large

  // Invariants: every accepted page ends exactly once; the provider never refuses.
  std::int64_t pages_accepted = 0;
  std::int64_t pages_done = 0;
  std::int64_t pages_failed = 0;
  std::int64_t pages_lost = 0;        // accepted but not ended when the run ended
  std::int64_t pages_duplicated = 0;  // answered twice
  std::int64_t provider_calls = 0;
  std::int64_t provider_refused_requests = 0;     // 429 for RPM
  std::int64_t provider_refused_tokens = 0;       // 429 for TPM
  std::int64_t provider_refused_concurrency = 0;  // 503 over the in-flight cap
  std::int64_t max_in_flight_seen = 0;
  std::int64_t out_of_turn = 0;  // pages sent first for a promise at risk

  // Fairness over windows in which at least two users were backlogged throughout.
  std::int64_t fairness_windows = 0;
  double min_jain = 1.0;
  double max_share_deviation = 0.0;  // max |share / fair share - 1| over users and windows
  std::map<std::string, std::int64_t> tokens_while_backlogged;  // by user

  Utilisation utilisation;

  // |actual - predicted| / actual over accepted books (fair scheduler only): completion
  // times promised at the door, and (with an ETA snapshot) remaining times at the snapshot.
  std::vector<double> eta_errors;
  std::vector<double> snapshot_eta_errors;
  // Revisions of promises, by reason (dispatch_paused, provider_slower, more_work_ahead).
  std::map<std::string, std::int64_t> revisions;
  // Accepted books that took longer than the door's max_wait (when one is set).
  std::int64_t books_over_max_wait = 0;

  double simulated_s = 0.0;
  double wall_s = 0.0;
  std::int64_t events = 0;
};

// Runs `scenario` with `scheduler`. Deterministic for a given scenario seed.
Metrics simulate(const Scenario& scenario, SchedulerKind scheduler);

// fairlane's budget in a run of `fairlane`: as fairlane serve keeps it for those limits
// (BudgetLimits::served, its token headroom included).
BudgetLimits limits_of(const FairlaneSettings& fairlane);

// The books' completion times under fluid fair sharing (generalized processor sharing in
// tokens, by weight, FIFO within a user): the ideal each book is compared with. Fills
// BookResult::ideal_s; skipped (left empty) above `max_books`.
void fill_fair_share_ideal(const Scenario& scenario, std::vector<BookResult>& books,
                           std::size_t max_books = 5'000);

}  // namespace fairlane::sim
