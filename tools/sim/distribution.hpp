// Sampling the scenario's distributions (latency, output tokens) and their means.
#pragma once

#include <random>

#include "scenario.hpp"

namespace fairlane::sim {

// One draw of `d`.
double sample(const Distribution& d, std::mt19937_64& rng);

// The mean of `d` (closed form for fixed and lognormal, numeric for quantiles).
double mean(const Distribution& d);

}  // namespace fairlane::sim
