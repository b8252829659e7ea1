#include "distribution.hpp"

#include <algorithm>
#include <cmath>

namespace fairlane::sim {
namespace {

// The z-score of the 90th percentile of a standard normal.
constexpr double kZ90 = 1.2815515655446004;

double lognormal_sigma(const Distribution& d) {
  return std::log(d.p90 / d.median) / kZ90;
}

// The quantile function of a `quantiles` distribution at probability u, interpolating
// log-linearly between the given points.
double quantile(const Distribution& d, double u) {
  const auto& q = d.quantiles;
  const auto upper = std::upper_bound(q.begin(), q.end(), u,
                                      [](double p, const auto& point) { return p < point.first; });
  if (upper == q.begin()) return q.front().second;
  if (upper == q.end()) return q.back().second;
  const auto lower = std::prev(upper);
  const double f = (u - lower->first) / (upper->first - lower->first);
  return std::exp(std::log(lower->second) +
                  f * (std::log(upper->second) - std::log(lower->second)));
}

}  // namespace

double sample(const Distribution& d, std::mt19937_64& rng) {
  switch (d.kind) {
    case Distribution::Kind::fixed:
      return d.value;
    case Distribution::Kind::lognormal: {
      std::normal_distribution<double> z(0.0, 1.0);
      return d.median * std::exp(lognormal_sigma(d) * z(rng));
    }
    case Distribution::Kind::quantiles: {
      std::uniform_real_distribution<double> u(0.0, 1.0);
      return quantile(d, u(rng));
    }
  }
  return d.value;
}

double mean(const Distribution& d) {
  switch (d.kind) {
    case Distribution::Kind::fixed:
      return d.value;
    case Distribution::Kind::lognormal: {
      const double sigma = lognormal_sigma(d);
      return d.median * std::exp(sigma * sigma / 2.0);
    }
    case Distribution::Kind::quantiles: {
      // Midpoint rule over the quantile function: the mean is its integral over [0, 1].
      constexpr int kSteps = 100'000;
      double total = 0.0;
      for (int i = 0; i < kSteps; ++i) total += quantile(d, (i + 0.5) / kSteps);
      return total / kSteps;
    }
  }
  return d.value;
}

}  // namespace fairlane::sim
