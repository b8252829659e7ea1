#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "distribution.hpp"
#include "report.hpp"
#include "scenario.hpp"
#include "simulation.hpp"

using fairlane::StatusCode;
using fairlane::sim::Distribution;
using fairlane::sim::invariants_hold;
using fairlane::sim::parse_scenario;
using fairlane::sim::SchedulerKind;
using fairlane::sim::simulate;

namespace {

// Figure 1 in small: six heavy books of 40 pages at t = 0, a light one at t = 10 s (when
// the full buckets' burst is spent), at limits of 600 RPM, 48,000 TPM (1 page/s of 800
// tokens), 20 in flight, 2 s a call.
const char* const kHeavyAndLight = R"({
  "name": "small heavy and light",
  "seed": 11,
  "provider": {"rpm": 600, "tpm": 48000, "max_in_flight": 20,
               "latency_s": {"kind": "fixed", "value": 2.0},
               "output_tokens": {"kind": "fixed", "value": 240}},
  "fairlane": {"rpm": 600, "tpm": 48000, "max_in_flight": 20, "max_tokens": 240},
  "users": [{"name": "heavy"}, {"name": "light"}],
  "arrivals": [{"at_s": 0, "user": "heavy", "books": 6, "pages": 40, "input_tokens": 560},
               {"at_s": 10, "user": "light", "books": 1, "pages": 40, "input_tokens": 560}],
  "eta_snapshot_s": 20
})";

fairlane::sim::Scenario scenario_from(const std::string& json) {
  auto scenario = parse_scenario(json, "test");
  REQUIRE_MESSAGE(scenario.ok(), scenario.status().message());
  return std::move(scenario).value();
}

}  // namespace

TEST_CASE("The simulator ends every page exactly once and never exceeds a provider limit") {
  const auto scenario = scenario_from(kHeavyAndLight);
  for (const SchedulerKind kind : {SchedulerKind::fair, SchedulerKind::fifo}) {
    const auto m = simulate(scenario, kind);
    CHECK(m.pages_accepted == 280);
    CHECK(m.pages_done == 280);
    CHECK(m.pages_lost == 0);
    CHECK(m.pages_duplicated == 0);
    CHECK(m.provider_calls == 280);
    CHECK(m.provider_refused_requests + m.provider_refused_tokens +
              m.provider_refused_concurrency ==
          0);
    CHECK(m.max_in_flight_seen <= 20);
    CHECK(invariants_hold(m));
    for (const auto& book : m.books) CHECK(book.finish_s > book.arrival_s);
  }
}

TEST_CASE(
    "Fair sharing finishes the light book near its fair-share ideal, first come first served does "
    "not") {
  const auto scenario = scenario_from(kHeavyAndLight);
  const auto fair = simulate(scenario, SchedulerKind::fair);
  const auto fifo = simulate(scenario, SchedulerKind::fifo);
  const auto& light_fair = fair.books.back();
  const auto& light_fifo = fifo.books.back();
  REQUIRE(light_fair.user == "light");
  REQUIRE(light_fair.ideal_s.has_value());
  CHECK(light_fair.completion_s() <= 1.1 * *light_fair.ideal_s);
  CHECK(light_fifo.completion_s() > 2.0 * light_fair.completion_s());
  // Both users got half the tokens while both waited.
  const double heavy = static_cast<double>(fair.tokens_while_backlogged.at("heavy"));
  const double light = static_cast<double>(fair.tokens_while_backlogged.at("light"));
  CHECK(heavy / (heavy + light) == doctest::Approx(0.5).epsilon(0.05));
  // The estimator, asked at 10 s about a queue of known work, is close.
  REQUIRE_FALSE(fair.snapshot_eta_errors.empty());
  CHECK(fairlane::sim::quantile(fair.snapshot_eta_errors, 0.9) <= 0.15);
}

TEST_CASE("A provider stricter than fairlane's settings shows as violations, and no page is lost") {
  auto scenario = scenario_from(kHeavyAndLight);
  scenario.provider.max_in_flight = 5;  // fairlane still believes 20
  const auto m = simulate(scenario, SchedulerKind::fair);
  CHECK(m.provider_refused_concurrency > 0);
  CHECK_FALSE(invariants_hold(m));
  CHECK(m.pages_done == 280);
  CHECK(m.pages_lost == 0);
  // Every refused call was made again: calls = pages + refusals.
  CHECK(m.provider_calls == 280 + m.provider_refused_concurrency + m.provider_refused_requests +
                                m.provider_refused_tokens);
}

TEST_CASE("A scenario with a mistake is refused, naming the field") {
  const auto unknown = parse_scenario(R"({"arrivals": [], "speling": 1})", "x.json");
  CHECK(unknown.status().code() == StatusCode::invalid_argument);
  CHECK(unknown.status().message().find("speling") != std::string::npos);
  CHECK(unknown.status().message().find("x.json") != std::string::npos);

  const auto stranger = parse_scenario(R"({"arrivals": [{"user": "nobody"}]})", "x.json");
  CHECK(stranger.status().message().find("nobody") != std::string::npos);

  const auto negative = parse_scenario(
      R"({"users": [{"name": "a"}], "arrivals": [{"user": "a", "pages": -3}]})", "x.json");
  CHECK(negative.status().message().find("arrivals[0].pages") != std::string::npos);

  CHECK(parse_scenario("{not json", "x.json").status().message().find("not valid JSON") !=
        std::string::npos);
  CHECK(parse_scenario(R"({"users": []})", "x.json")
            .status()
            .message()
            .find("nothing would happen") != std::string::npos);
}

TEST_CASE("A reseed keeps the past page for page and draws the future apart") {
  // Lognormal latencies: every call's draw shows in when its book ends. Book a ends long
  // before the reseed at 30 s; book b arrives after it.
  const char* const kTwoBooks = R"({
    "seed": 5,
    "provider": {"rpm": 600, "tpm": 48000, "max_in_flight": 20,
                 "latency_s": {"kind": "lognormal", "median": 2.0, "p90": 3.5},
                 "output_tokens": {"kind": "fixed", "value": 240}},
    "fairlane": {"rpm": 600, "tpm": 48000, "max_in_flight": 20, "max_tokens": 240},
    "users": [{"name": "a"}, {"name": "b"}],
    "arrivals": [{"at_s": 0, "user": "a", "pages": 10, "input_tokens": 560},
                 {"at_s": 40, "user": "b", "pages": 10, "input_tokens": 560}]
  })";
  auto scenario = scenario_from(kTwoBooks);
  const auto plain = simulate(scenario, SchedulerKind::fair);
  scenario.reseed_at_s = 30.0;
  scenario.reseed_seed = 6;
  const auto six = simulate(scenario, SchedulerKind::fair);
  const auto again = simulate(scenario, SchedulerKind::fair);
  scenario.reseed_seed = 7;
  const auto seven = simulate(scenario, SchedulerKind::fair);
  REQUIRE(plain.books.size() == 2);
  REQUIRE(plain.books[0].finish_s < 30.0);
  for (const auto* m : {&six, &again, &seven}) {
    REQUIRE(m->books.size() == 2);
    CHECK(m->books[0].finish_s == plain.books[0].finish_s);
  }
  CHECK(six.books[1].finish_s == again.books[1].finish_s);
  CHECK(six.books[1].finish_s != seven.books[1].finish_s);
  CHECK(six.books[1].finish_s != plain.books[1].finish_s);

  const auto parsed = parse_scenario(
      R"({"users": [{"name": "a"}], "arrivals": [{"user": "a"}], "reseed": {"at_s": 5, "seed": 9}})",
      "x.json");
  REQUIRE_MESSAGE(parsed.ok(), parsed.status().message());
  CHECK(parsed.value().reseed_at_s == 5.0);
  CHECK(parsed.value().reseed_seed == 9);
  const auto misspelt = parse_scenario(
      R"({"users": [{"name": "a"}], "arrivals": [{"user": "a"}], "reseed": {"at": 5}})", "x.json");
  CHECK(misspelt.status().message().find("reseed") != std::string::npos);
}

TEST_CASE(
    "Distributions: a quantile table's draws stay within it, and a lognormal's median holds") {
  Distribution table;
  table.kind = Distribution::Kind::quantiles;
  table.quantiles = {{0.0, 40}, {0.5, 240}, {0.9, 1100}, {0.99, 3800}, {1.0, 4000}};
  std::mt19937_64 rng(7);
  int below_median = 0;
  for (int i = 0; i < 10'000; ++i) {
    const double x = fairlane::sim::sample(table, rng);
    CHECK(x >= 40.0);
    CHECK(x <= 4000.0);
    if (x < 240.0) ++below_median;
  }
  CHECK(below_median == doctest::Approx(5'000).epsilon(0.05));
  CHECK(fairlane::sim::mean(table) > 240.0);

  Distribution lognormal;
  lognormal.kind = Distribution::Kind::lognormal;
  lognormal.median = 2.0;
  lognormal.p90 = 3.5;
  int below = 0;
  for (int i = 0; i < 10'000; ++i) below += fairlane::sim::sample(lognormal, rng) < 2.0 ? 1 : 0;
  CHECK(below == doctest::Approx(5'000).epsilon(0.05));
}

TEST_CASE("A book made late by work that came after its promise is told so before it passes") {
  // The light book at 10 s takes half the provider from the heavy books promised at 0 s:
  // those that end later than their promise and its slack were each revised before it.
  const auto m = simulate(scenario_from(kHeavyAndLight), SchedulerKind::fair);
  const auto f = fairlane::sim::promise_figures(m, 1e18, "");
  CHECK(f.late_over_slack >= 3);
  CHECK(f.revised_in_time == f.late_over_slack);
  CHECK(m.revisions.at("more_work_ahead") >= f.late_over_slack);
  for (const auto& book : m.books) {
    if (!book.first_revised_s) continue;
    CHECK(*book.first_revised_s < *book.predicted_eta_s);
    // What they were told instead holds: the heavy books end at their fair-share time.
    CHECK(book.completion_s() == doctest::Approx(*book.revised_eta_s).epsilon(0.05));
  }
}

TEST_CASE("Jain's index counts a user only in windows they were backlogged through") {
  // A from 0 s; B joins at 30 s, half way through the first 60 s window, which therefore
  // has one user backlogged throughout and does not count.
  const auto scenario = scenario_from(R"({
    "seed": 3,
    "provider": {"rpm": 600, "tpm": 48000, "max_in_flight": 20,
                 "latency_s": {"kind": "fixed", "value": 2.0},
                 "output_tokens": {"kind": "fixed", "value": 240}},
    "fairlane": {"rpm": 600, "tpm": 48000, "max_in_flight": 20, "max_tokens": 240},
    "users": [{"name": "a"}, {"name": "b"}],
    "arrivals": [{"at_s": 0, "user": "a", "pages": 1000, "input_tokens": 560},
                 {"at_s": 30, "user": "b", "pages": 200, "input_tokens": 560}]
  })");
  const auto m = simulate(scenario, SchedulerKind::fair);
  // B's 200 pages at half of 1 page/s end near 430 s: windows 60-120 ... 360-420 count.
  CHECK(m.fairness_windows == 6);
  CHECK(m.min_jain > 0.99);
}

TEST_CASE(
    "A step of books that arrive together: promised at once they end late, after the "
    "promise window they end on time") {
  // Eight users upload a 40-page book each in the same instant, at 1 page/s of tokens: fair
  // order ends them together, near 320 s; the door, answering one at a time, quoted the
  // first the empty provider.
  const char* const kStep = R"({
    "name": "a step",
    "seed": 3,
    "provider": {"rpm": 600, "tpm": 48000, "max_in_flight": 20,
                 "latency_s": {"kind": "fixed", "value": 2.0},
                 "output_tokens": {"kind": "fixed", "value": 240}},
    "fairlane": {"rpm": 600, "tpm": 48000, "max_in_flight": 20, "max_tokens": 240},
    "arrivals": [{"at_s": 0, "users": 8, "user_prefix": "u", "books": 1, "pages": 40,
                  "input_tokens": 560}]
  })";
  auto scenario = scenario_from(kStep);
  scenario.fairlane.promise_window_s = 0.0;
  const auto late_books = [](const fairlane::sim::Metrics& m) {
    int late = 0;
    for (const auto& book : m.books) {
      REQUIRE(book.predicted_eta_s.has_value());
      if (book.completion_s() > *book.predicted_eta_s * 1.1) ++late;
    }
    return late;
  };
  const auto at_once = simulate(scenario, SchedulerKind::fair);
  REQUIRE(at_once.books.size() == 8);
  CHECK(late_books(at_once) >= 6);

  scenario.fairlane.promise_window_s = 0.25;
  const auto windowed = simulate(scenario, SchedulerKind::fair);
  REQUIRE(windowed.books.size() == 8);
  CHECK(late_books(windowed) == 0);
  CHECK(invariants_hold(windowed));
  // The same dispatch: the window changes promises, not the order.
  for (std::size_t i = 0; i < 8; ++i) {
    CHECK(windowed.books[i].finish_s == doctest::Approx(at_once.books[i].finish_s));
    // Never promised earlier than the door's first answer.
    CHECK(*windowed.books[i].predicted_eta_s >= *at_once.books[i].predicted_eta_s - 1e-9);
  }
}

TEST_CASE("The fair-share ideal is finite for a provider that answers at once, or pages of 0") {
  // A latency of 0 made the in-flight rate infinite, and the ideal's burst stepped by
  // infinity x 0 = NaN: the work left was never done, and the simulator never returned.
  // Pages of no tokens (none in, none out) divided 0 by 0 the same way.
  for (const char* provider : {R"("latency_s": {"kind": "fixed", "value": 0},
           "output_tokens": {"kind": "fixed", "value": 240})",
                               R"("latency_s": {"kind": "fixed", "value": 1},
           "output_tokens": {"kind": "fixed", "value": 0})"}) {
    CAPTURE(provider);
    const auto scenario = scenario_from(std::string(R"({
      "name": "instant", "seed": 1,
      "provider": {"rpm": 600, "tpm": 48000, "max_in_flight": 20, )") +
                                        provider + R"(},
      "fairlane": {"rpm": 600, "tpm": 48000, "max_in_flight": 20, "max_tokens": 240},
      "users": [{"name": "a"}, {"name": "b"}],
      "arrivals": [{"at_s": 0, "user": "a", "books": 1, "pages": 40, "input_tokens": 0}]
    })");
    const auto make = [](std::string user, double at_s, std::int64_t pages) {
      fairlane::sim::BookResult result;
      result.user = std::move(user);
      result.arrival_s = at_s;
      result.pages = pages;
      return result;
    };
    std::vector<fairlane::sim::BookResult> books{make("a", 0.0, 40), make("a", 0.0, 40),
                                                 make("b", 5.0, 10)};
    fairlane::sim::fill_fair_share_ideal(scenario, books);
    for (const auto& book : books) {
      REQUIRE(book.ideal_s.has_value());
      CHECK(std::isfinite(*book.ideal_s));
      CHECK(*book.ideal_s >= 0.0);
    }
  }
}

TEST_CASE(
    "Utilisation while backlogged is what the provider counted of what the buckets let go: "
    "not over 100% when the backlog comes and goes, full when it stays") {
  // One user at 1 page/s of tokens, 20 calls in flight of 2 s; `arrivals` its books.
  const auto one_user = [](const std::string& arrivals) {
    std::string json = R"({
      "seed": 3,
      "provider": {"rpm": 600, "tpm": 48000, "max_in_flight": 20,
                   "latency_s": {"kind": "fixed", "value": 2.0},
                   "output_tokens": {"kind": "fixed", "value": 240}},
      "fairlane": {"rpm": 600, "tpm": 48000, "max_in_flight": 20, "max_tokens": 240},
      "users": [{"name": "a"}],
      "arrivals": [)";
    json += arrivals;
    json += "]}";
    return scenario_from(json);
  };
  // Books of 30 pages every 100 s: each finds the token bucket full (60 pages), sends 20 at
  // once and 10 more 2 s later. Before, what was sent in the 2 s the pages waited, against
  // the refill of those 2 s alone, was 1,450%.
  std::string every_100_s;
  for (int i = 0; i < 5; ++i) {
    if (i > 0) every_100_s += ", ";
    every_100_s += R"({"at_s": )";
    every_100_s += std::to_string(i * 100);
    every_100_s += R"(, "user": "a", "pages": 30, "input_tokens": 560})";
  }
  const auto b = simulate(one_user(every_100_s), SchedulerKind::fair);
  REQUIRE(b.utilisation.measured_s > 0.0);
  CHECK(b.utilisation.tokens <= 1.0);
  CHECK(b.utilisation.requests <= 1.0);
  // Calls in flight were what pages waited for: 20 of 20 most of the time they waited.
  CHECK(b.utilisation.concurrency > 0.6);

  // One backlog of 1,000 pages, tokens binding throughout: the limit is used to the full.
  const auto steady = one_user(R"({"at_s": 0, "user": "a", "pages": 1000, "input_tokens": 560})");
  const auto s = simulate(steady, SchedulerKind::fair);
  CHECK(s.utilisation.tokens == doctest::Approx(1.0).epsilon(0.02));
  CHECK(s.utilisation.tokens <= 1.0 + 1e-9);

  // The same backlog reserving twice what it uses: what each call does not use comes back
  // while pages still wait, and is sent again; the limit is used to the full all the same.
  auto reserving = steady;
  reserving.fairlane.max_tokens = 1040;
  const auto r = simulate(reserving, SchedulerKind::fair);
  CHECK(r.utilisation.tokens == doctest::Approx(1.0).epsilon(0.02));
}
