// The simulator's report: one Markdown section per scheduler run of a scenario.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "scenario.hpp"
#include "simulation.hpp"

namespace fairlane::sim {

// What the door promised against what happened, in one run: the report's "Promises" part.
struct PromiseFigures {
  // Accepted books with a promise (the door is asked under the fair scheduler only).
  std::size_t promised = 0;
  // Accepted books that never finished (a broken run): left out of every figure here.
  std::size_t unfinished = 0;
  // Lateness, (actual completion - promised) / promised: above 0 late, below 0 early.
  double lateness_p50 = 0.0;
  double lateness_p90 = 0.0;
  double lateness_max = 0.0;
  std::size_t late_over_10 = 0;  // later than the promise + 10%
  double late_over_10_share = 0.0;
  double abs_error_p50 = 0.0;  // p50 of |actual - promised| / promised: pessimism shows too
  // Books that ended later than their promise + max(2 s, 10%), the slack past which a
  // promise is revised (core/promise_watch), and of them those first told a later finish
  // before their promise passed, with how long before it (p50).
  std::size_t late_over_slack = 0;
  std::size_t revised_in_time = 0;
  double notice_p50_s = 0.0;
  // Books revised at least once, and p50 of |actual - last revision| / last revision, both
  // from the book's arrival: whether what they were told instead was right.
  std::size_t revised = 0;
  double revised_error_p50 = 0.0;
  // Accepted books whose wait, completion - the door's estimate of their time alone (all
  // of the completion when the door was not asked), exceeded max_wait, and max_wait + 10%.
  std::size_t over_max_wait = 0;
  std::size_t over_max_wait_10 = 0;
  // The light user's book furthest from its fair-share ideal (when the user is named, has a
  // book, and the ideal was computed).
  struct Light {
    double completion_s = 0.0;
    double ideal_s = 0.0;
    double ratio = 0.0;
  };
  std::optional<Light> light;
  std::int64_t fairness_windows = 0;
  double min_jain = 1.0;
  // The limit used most while backlogged (RPM, TPM or in flight) and how much of it; empty
  // when nothing was measured.
  std::string binding;
  double binding_utilisation = 0.0;
};

// The figures of `m`, with the door's `max_wait_s` and the scenario's light user (empty:
// none).
PromiseFigures promise_figures(const Metrics& m, double max_wait_s, const std::string& light_user);

std::string markdown_report(const Scenario& scenario, const std::vector<Metrics>& runs);

// Every accepted book of `run` as CSV rows (scenario, scheduler, user, arrival_s, pages,
// input_tokens, promised_s, own_s, taken_s, ideal_s, first_revised_s, revised_eta_s; an
// unknown figure left empty), under
// books_csv_header()'s columns.
std::string books_csv_header();
std::string books_csv(const Scenario& scenario, const Metrics& run);

// Whether a run kept the invariants: every accepted page ended exactly once, and the
// provider never refused a call.
bool invariants_hold(const Metrics& metrics);

// The q-quantile (0..1) of `values` (sorted copy); 0 when empty.
double quantile(std::vector<double> values, double q);

}  // namespace fairlane::sim
