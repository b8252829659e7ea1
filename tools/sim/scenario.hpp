// Scenario: what fairlane-sim simulates, read from a JSON file (samples/scenarios/*.json):
// the provider's limits and behaviour, fairlane's configuration, the users, and the books
// that arrive (at given times, or as Poisson streams). docs/simulator.md describes the
// format field by field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fairlane/core/result.hpp"

namespace fairlane::sim {

// A distribution of a positive quantity: fixed, lognormal (median and p90), or a quantile
// function given by points (probability, value) interpolated log-linearly.
struct Distribution {
  enum class Kind { fixed, lognormal, quantiles };
  Kind kind = Kind::fixed;
  double value = 0.0;                                     // fixed
  double median = 0.0;                                    // lognormal
  double p90 = 0.0;                                       // lognormal
  std::vector<std::pair<double, double>> quantiles = {};  // (p, value), p from 0 to 1
};

// From `at_s` on, the provider enforces new limits and its calls take `latency_scale` times
// what latency_s draws. A limit left out keeps the value it had; fairlane is not told.
struct ProviderChange {
  double at_s = 0.0;
  std::optional<std::int64_t> requests_per_minute;
  std::optional<std::int64_t> tokens_per_minute;
  std::optional<std::int64_t> max_in_flight;
  std::optional<double> latency_scale;
};

struct ProviderModel {
  std::int64_t requests_per_minute = 1'500;
  std::int64_t tokens_per_minute = 300'000;
  std::int64_t max_in_flight = 200;
  Distribution latency_s{Distribution::Kind::fixed, 2.0};
  Distribution output_tokens{Distribution::Kind::fixed, 240.0};
  std::vector<ProviderChange> changes;  // at rising times
};

struct FairlaneSettings {
  std::int64_t requests_per_minute = 1'500;
  std::int64_t tokens_per_minute = 300'000;
  std::int64_t max_in_flight = 200;
  std::int64_t max_tokens = 240;  // output reserve per page
  double max_wait_s = 1e18;       // the door; effectively off unless set
  std::int64_t max_queued_pages_per_user = 1'000'000'000;
  std::int64_t quantum = 0;  // 0 = automatic
  double initial_tokens_per_page = 800.0;
  double initial_latency_s = 2.0;
  // The fair scheduler lets a job whose promise is at risk go first (PromiseOrder); false:
  // plain deficit round robin, for comparison (fairlane-sim --ignore-promises).
  bool keep_promises = true;
  // How long the door's promise waits for the books that arrive with it (PromiseWindow), as
  // `fairlane serve --promise-window` (its default); 0: promised at once
  // (fairlane-sim --promise-window).
  double promise_window_s = 0.25;
};

struct UserSpec {
  std::string name;
  std::int64_t weight = 1;
};

// `books` books of `pages` pages, each page `input_tokens` of input, arriving at `at_s`,
// for `user`, or (when `users` > 0) for each of users user_prefix1 ... user_prefixN.
struct Arrival {
  double at_s = 0.0;
  std::string user;
  std::int64_t users = 0;
  std::string user_prefix = "user-";
  std::int64_t books = 1;
  std::int64_t pages = 100;
  std::int64_t input_tokens = 560;
};

// Books arriving as a Poisson process of `rate_per_s` from `from_s` to `until_s`, each
// from a user drawn uniformly from `users` (names user-1 ... user-N, created as needed),
// of `pages` pages, or of a number drawn from `pages_drawn` (rounded, at least 1).
struct PoissonArrivals {
  std::int64_t users = 1;
  std::string user_prefix = "user-";
  double rate_per_s = 0.1;
  double from_s = 0.0;
  double until_s = 60.0;
  std::int64_t pages = 100;
  std::optional<Distribution> pages_drawn;
  std::int64_t input_tokens = 560;
};

enum class SchedulerKind { fair, fifo };

struct Scenario {
  std::string name;
  std::string description;
  std::uint64_t seed = 1;
  ProviderModel provider;
  FairlaneSettings fairlane;
  std::vector<UserSpec> users;
  std::vector<Arrival> arrivals;
  std::vector<PoissonArrivals> poisson;
  std::vector<SchedulerKind> schedulers{SchedulerKind::fair};
  double window_s = 60.0;  // Jain's index window
  // When set, every job with queued pages is asked its ETA at this time, and the answers
  // are compared with when the jobs really end (the estimator on a queue of known work).
  std::optional<double> eta_snapshot_s;
  // When set, the random draws (latencies, output tokens) start again from `reseed_seed` at
  // this time: the runs of one scenario share their past and draw their futures apart (what
  // tools/sim/futures does to ask how well any promise could do).
  std::optional<double> reseed_at_s;
  std::uint64_t reseed_seed = 0;
  // The user whose books the report compares with their fair-share ideal ("the light
  // user"); empty when the scenario names none.
  std::string light_user;
};

// Reads a scenario; the Status names the file and the field when something is wrong.
Result<Scenario> load_scenario(const std::string& path);
Result<Scenario> parse_scenario(const std::string& text, const std::string& origin);

}  // namespace fairlane::sim
