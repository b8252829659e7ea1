// The simulator's provider model when the provider changes its limits and latency mid-run,
// and the scenario fields behind it (provider.changes, poisson pages drawn, light_user).
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <variant>

#include "core/fake_clock.hpp"
#include "provider.hpp"
#include "report.hpp"
#include "scenario.hpp"
#include "simulation.hpp"

using fairlane::FakeClock;
using fairlane::Lease;
using fairlane::Limit;
using fairlane::Wait;
using fairlane::sim::parse_scenario;
using fairlane::sim::Provider;
using fairlane::sim::ProviderChange;
using fairlane::sim::ProviderModel;
using fairlane::sim::SchedulerKind;
using fairlane::sim::simulate;
using namespace std::chrono_literals;

namespace {

fairlane::sim::Scenario scenario_from(const std::string& json) {
  auto scenario = parse_scenario(json, "test");
  REQUIRE_MESSAGE(scenario.ok(), scenario.status().message());
  return std::move(scenario).value();
}

std::string error_of(const std::string& json) {
  const auto scenario = parse_scenario(json, "x.json");
  REQUIRE_FALSE(scenario.ok());
  return scenario.status().message();
}

}  // namespace

TEST_CASE("Provider: lower limits hold from the change on, and no fresh minute comes with them") {
  FakeClock clock;
  ProviderModel model;
  model.requests_per_minute = 0;
  model.tokens_per_minute = 60'000;  // 1,000 a second
  model.max_in_flight = 0;
  ProviderChange change;
  change.at_s = 10.0;
  change.tokens_per_minute = 6'000;
  model.changes = {change};
  Provider provider(clock, model);
  auto first = provider.admit(60'000);  // the whole bucket
  REQUIRE(std::holds_alternative<Lease>(first));
  std::get<Lease>(first).settle(60'000);
  clock.advance(5s);  // 5,000 back under the old limits
  CHECK(std::holds_alternative<Lease>(provider.admit(5'000)));
  CHECK(std::holds_alternative<Wait>(provider.admit(1'000)));
  // The change: the old bucket had 5,000 left, so the new one (6,000 a minute) starts
  // with 5,000, not full.
  clock.advance(5s);
  auto at_change = provider.admit(5'000);
  REQUIRE(std::holds_alternative<Lease>(at_change));
  CHECK(provider.limits().tokens_per_minute == 6'000);
  const auto refused = provider.admit(1'000);  // 100 a second now: 10 s for the next 1,000
  REQUIRE(std::holds_alternative<Wait>(refused));
  CHECK(std::get<Wait>(refused).limit == Limit::tokens);
  CHECK(std::get<Wait>(refused).wait == 10s);
}

TEST_CASE("Provider: calls out before a change still count against the in-flight cap") {
  FakeClock clock;
  ProviderModel model;
  model.requests_per_minute = 0;
  model.tokens_per_minute = 0;
  model.max_in_flight = 2;
  ProviderChange change;
  change.at_s = 1.0;
  change.latency_scale = 3.0;
  model.changes = {change};
  Provider provider(clock, model);
  auto a = provider.admit(100);
  auto b = provider.admit(100);
  REQUIRE(std::holds_alternative<Lease>(a));
  REQUIRE(std::holds_alternative<Lease>(b));
  clock.advance(1s);
  const auto full = provider.admit(100);  // applies the change: both earlier calls are out
  CHECK(provider.latency_scale() == 3.0);
  REQUIRE(std::holds_alternative<Wait>(full));
  CHECK(std::get<Wait>(full).limit == Limit::concurrency);
  std::get<Lease>(a).settle(100);
  auto c = provider.admit(100);
  CHECK(std::holds_alternative<Lease>(c));
  CHECK(std::holds_alternative<Wait>(provider.admit(100)));
}

TEST_CASE("Provider: the latency scale applies to the calls made after the change") {
  const auto scenario = scenario_from(R"({
    "provider": {"rpm": 600, "tpm": 48000, "max_in_flight": 20,
                 "latency_s": {"kind": "fixed", "value": 2.0},
                 "output_tokens": {"kind": "fixed", "value": 240},
                 "changes": [{"at_s": 10, "latency_scale": 2.0}]},
    "fairlane": {"rpm": 600, "tpm": 48000, "max_in_flight": 20, "max_tokens": 240},
    "users": [{"name": "a"}],
    "arrivals": [{"at_s": 0, "user": "a", "pages": 1}, {"at_s": 20, "user": "a", "pages": 1}]
  })");
  const auto m = simulate(scenario, SchedulerKind::fair);
  REQUIRE(m.books.size() == 2);
  CHECK(m.books[0].completion_s() == doctest::Approx(2.0));
  CHECK(m.books[1].completion_s() == doctest::Approx(4.0));
  CHECK(fairlane::sim::invariants_hold(m));
}

TEST_CASE(
    "Provider: a provider halving its TPM says so in its answers: fairlane follows, refused "
    "nothing") {
  const std::string base = R"({
    "provider": {"rpm": 600, "tpm": 48000, "max_in_flight": 20,
                 "latency_s": {"kind": "fixed", "value": 2.0},
                 "output_tokens": {"kind": "fixed", "value": 240}CHANGES},
    "fairlane": {"rpm": 600, "tpm": 48000, "max_in_flight": 20, "max_tokens": 240},
    "users": [{"name": "a"}],
    "arrivals": [{"at_s": 0, "user": "a", "pages": 200, "input_tokens": 560}]
  })";
  const auto with = [&](const std::string& changes) {
    std::string json = base;
    json.replace(json.find("CHANGES"), 7, changes);
    return simulate(scenario_from(json), SchedulerKind::fair);
  };
  const auto steady = with("");
  const auto halved = with(R"(, "changes": [{"at_s": 60, "tpm": 24000}])");
  CHECK(steady.provider_refused_tokens == 0);
  // Every answer announces the limits and what is left (as x-ratelimit-* headers do), and
  // the policy's buckets follow them: nothing is refused across the change.
  CHECK(halved.provider_refused_tokens == 0);
  CHECK(fairlane::sim::invariants_hold(halved));
  CHECK(halved.pages_done == 200);
  CHECK(halved.pages_lost == 0);
  CHECK(halved.pages_duplicated == 0);
  // About 120 pages are done by 60 s; the other 80 go at half a page a second, not one.
  REQUIRE(halved.books.size() == 1);
  CHECK(halved.books[0].finish_s > steady.books[0].finish_s + 60.0);
}

TEST_CASE("Scenario: provider changes, drawn page counts and the light user are checked") {
  const std::string changes_prefix = R"({"users": [{"name": "a"}],
    "arrivals": [{"user": "a"}], "provider": {"changes": )";
  CHECK(error_of(changes_prefix + R"([{"tpm": 100}]}})").find("provider.changes[0] needs at_s") !=
        std::string::npos);
  CHECK(error_of(changes_prefix + R"([{"at_s": 5}]}})").find("changes nothing") !=
        std::string::npos);
  CHECK(error_of(changes_prefix + R"([{"at_s": 5, "tpm": 1}, {"at_s": 5, "rpm": 2}]}})")
            .find("provider.changes[1].at_s is 5: each change must come after") !=
        std::string::npos);
  CHECK(error_of(changes_prefix + R"([{"at_s": 5, "tmp": 1}]}})").find("unknown field 'tmp'") !=
        std::string::npos);
  CHECK(error_of(changes_prefix + R"({"at_s": 5}}})").find("provider.changes must be a list") !=
        std::string::npos);
  CHECK(error_of(changes_prefix + R"([{"at_s": 5, "latency_scale": 0}]}})")
            .find("provider.changes[0].latency_scale") != std::string::npos);
  CHECK(error_of(R"({"poisson": [{"pages": {"kind": "uniform"}}]})")
            .find("poisson[0].pages.kind is 'uniform'") != std::string::npos);
  CHECK(error_of(R"({"users": [{"name": "a"}], "light_user": "b", "arrivals": [{"user": "a"}]})")
            .find("scenario.light_user 'b' is not in scenario.users") != std::string::npos);

  const auto scenario = scenario_from(R"({
    "light_user": "a", "users": [{"name": "a"}],
    "provider": {"changes": [{"at_s": 5, "tpm": 1000, "latency_scale": 1.5}, {"at_s": 9, "rpm": 7}]},
    "poisson": [{"users": 3, "rate_per_s": 1, "until_s": 200,
                 "pages": {"kind": "quantiles", "points": [[0, 3], [1, 36]]}}]
  })");
  CHECK(scenario.light_user == "a");
  REQUIRE(scenario.provider.changes.size() == 2);
  CHECK(scenario.provider.changes[0].tokens_per_minute == 1000);
  CHECK(scenario.provider.changes[0].latency_scale == 1.5);
  CHECK_FALSE(scenario.provider.changes[0].requests_per_minute.has_value());
  CHECK(scenario.provider.changes[1].requests_per_minute == 7);
  REQUIRE(scenario.poisson.size() == 1);
  REQUIRE(scenario.poisson[0].pages_drawn.has_value());

  // Books of 3 to 36 pages, drawn: within the table and not all of one size.
  auto unchanging = scenario;
  unchanging.provider.changes.clear();
  const auto m = simulate(unchanging, SchedulerKind::fifo);
  REQUIRE(m.books.size() > 100);
  std::int64_t smallest = 1'000, largest = 0;
  for (const auto& b : m.books) {
    smallest = std::min(smallest, b.pages);
    largest = std::max(largest, b.pages);
  }
  CHECK(smallest >= 3);
  CHECK(largest <= 36);
  CHECK(largest - smallest > 20);
}
