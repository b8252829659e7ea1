// The simulator's report: one Markdown section per scheduler run of a scenario.
#pragma once

#include <string>
#include <vector>

#include "scenario.hpp"
#include "simulation.hpp"

namespace fairlane::sim {

std::string markdown_report(const Scenario& scenario, const std::vector<Metrics>& runs);

// Whether a run kept the invariants: every accepted page ended exactly once, and the
// provider never refused a call.
bool invariants_hold(const Metrics& metrics);

// The q-quantile (0..1) of `values` (sorted copy); 0 when empty.
double quantile(std::vector<double> values, double q);

}  // namespace fairlane::sim
