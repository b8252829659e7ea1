// The report's Promises figures, on books made by hand and worked out by hand.
#include <doctest/doctest.h>

#include <string>

#include "report.hpp"
#include "scenario.hpp"
#include "simulation.hpp"

using fairlane::sim::BookResult;
using fairlane::sim::Metrics;
using fairlane::sim::promise_figures;

namespace {

BookResult book(const std::string& user, double arrival_s, double finish_s,
                std::optional<double> promised_s, std::optional<double> own_s,
                std::optional<double> ideal_s = std::nullopt) {
  BookResult b;
  b.user = user;
  b.arrival_s = arrival_s;
  b.pages = 10;
  b.finish_s = finish_s;
  b.finished = true;
  b.predicted_eta_s = promised_s;
  b.own_s = own_s;
  b.ideal_s = ideal_s;
  return b;
}

// Six books; completion, promise, own time alone, and (actual - promised) / promised:
//   A heavy   150 s, promised 100, own 20: +50%, waited 130 s
//   B heavy    60 s, promised 100, own 20: -40%, waited  40 s
//   C light    30 s, promised  20, own  5: +50%, waited  25 s, ideal 25 s (1.2x)
//   D light    10 s, promised   8, own  5: +25%, waited   5 s, ideal 10 s (1.0x)
//   E other    40 s, promised  50, own 30: -20%, waited  10 s
//   F other2   64 s, no promise:                 waited  64 s (all of its completion)
Metrics six_books() {
  Metrics m;
  m.books = {book("heavy", 0, 150, 100.0, 20.0),     book("heavy", 0, 60, 100.0, 20.0),
             book("light", 10, 40, 20.0, 5.0, 25.0), book("light", 20, 30, 8.0, 5.0, 10.0),
             book("other", 5, 45, 50.0, 30.0),       book("other2", 0, 64, std::nullopt, {})};
  m.fairness_windows = 4;
  m.min_jain = 0.97;
  m.utilisation.requests = 0.5;
  m.utilisation.tokens = 0.98;
  m.utilisation.concurrency = 0.7;
  m.utilisation.measured_s = 300;
  m.provider_refused_tokens = 7;
  return m;
}

}  // namespace

TEST_CASE("Promises: lateness quantiles, the share later than promise + 10%, and the abs error") {
  const auto f = promise_figures(six_books(), 60.0, "light");
  CHECK(f.promised == 5);  // F had no promise
  // Sorted: -40%, -20%, +25%, +50%, +50%; nearest rank: p50 the 3rd, p90 the 5th.
  CHECK(f.lateness_p50 == doctest::Approx(0.25));
  CHECK(f.lateness_p90 == doctest::Approx(0.5));
  CHECK(f.lateness_max == doctest::Approx(0.5));
  // A, C and D are more than 10% late.
  CHECK(f.late_over_10 == 3);
  CHECK(f.late_over_10_share == doctest::Approx(0.6));
  // |lateness| sorted: 20%, 25%, 40%, 50%, 50%: the early B counts as much as a late book.
  CHECK(f.abs_error_p50 == doctest::Approx(0.4));
}

TEST_CASE("Promises: a book that never finished is counted apart, not as early") {
  // Its finish stayed 0, so its completion was minus its arrival: a book stuck at 10 s,
  // promised 20, counted -150% (very early), never past max_wait, and a light user's
  // stuck book showed a negative ratio.
  Metrics m = six_books();
  BookResult stuck = book("light", 10, 0, 20.0, 5.0, 25.0);
  stuck.finished = false;
  m.books.push_back(stuck);
  const auto f = promise_figures(m, 60.0, "light");
  CHECK(f.unfinished == 1);
  CHECK(f.promised == 5);
  CHECK(f.lateness_p50 == doctest::Approx(0.25));
  CHECK(f.over_max_wait == 2);
  REQUIRE(f.light.has_value());
  CHECK(f.light->ratio == doctest::Approx(1.2));
}

TEST_CASE("Promises: books past max_wait count the wait the queue added, not the book's own time") {
  const auto f = promise_figures(six_books(), 60.0, "");
  // Waits 130, 40, 25, 5, 10 and 64 s: A and F past 60 s, only A past 66 s.
  CHECK(f.over_max_wait == 2);
  CHECK(f.over_max_wait_10 == 1);
  // At 50 s: B completed after 60 s but waited 40 s of it, so it is not past max_wait.
  const auto strict = promise_figures(six_books(), 50.0, "");
  CHECK(strict.over_max_wait == 2);     // A and F: 130 and 64 s
  CHECK(strict.over_max_wait_10 == 2);  // both past 55 s
}

TEST_CASE("Promises: the light user's slowest book, Jain's minimum and the binding limit") {
  const auto f = promise_figures(six_books(), 60.0, "light");
  REQUIRE(f.light.has_value());
  // C: 30 s against 25 s (1.2x) is slower against its ideal than D (10 s against 10 s).
  CHECK(f.light->completion_s == doctest::Approx(30.0));
  CHECK(f.light->ideal_s == doctest::Approx(25.0));
  CHECK(f.light->ratio == doctest::Approx(1.2));
  CHECK(f.fairness_windows == 4);
  CHECK(f.min_jain == doctest::Approx(0.97));
  CHECK(f.binding == "TPM");
  CHECK(f.binding_utilisation == doctest::Approx(0.98));

  CHECK_FALSE(promise_figures(six_books(), 60.0, "").light.has_value());
  CHECK_FALSE(promise_figures(six_books(), 60.0, "nobody").light.has_value());
}

TEST_CASE("Promises: a run without promises or a backlog gives no lateness and no binding limit") {
  Metrics m;
  m.books = {book("a", 0, 12, std::nullopt, std::nullopt)};
  const auto f = promise_figures(m, 1e18, "");
  CHECK(f.promised == 0);
  CHECK(f.late_over_10 == 0);
  CHECK(f.lateness_max == 0.0);
  CHECK(f.over_max_wait == 0);
  CHECK(f.binding.empty());
}

TEST_CASE("Promises: the report's section shows the figures and the provider's refusals") {
  fairlane::sim::Scenario scenario;
  scenario.fairlane.max_wait_s = 60.0;
  scenario.light_user = "light";
  const std::string md = fairlane::sim::markdown_report(scenario, {six_books()});
  INFO(md);
  CHECK(md.find("### Promises") != std::string::npos);
  CHECK(md.find("p50 / p90 / max | +25.0% / +50.0% / +50.0% |") != std::string::npos);
  CHECK(md.find("| accepted books later than promised + 10% | 3 of 5 (60.0%) |") !=
        std::string::npos);
  CHECK(md.find("| abs(actual - promised) / promised, p50 | 40.0% |") != std::string::npos);
  CHECK(md.find("past max_wait + 10% | 2 / 1 of 6 |") != std::string::npos);
  CHECK(md.find("| light user (light): its slowest book against its fair-share ideal | 30.0 s "
                "against 25.0 s (1.20x) |") != std::string::npos);
  CHECK(md.find("| Jain's index, lowest window | 0.9700 (4 windows) |") != std::string::npos);
  CHECK(md.find("| utilisation of the binding limit while backlogged | TPM 98.0% (over 300 s "
                "backlogged) |") != std::string::npos);
  CHECK(md.find("| provider refusals: 429 for RPM, 429 for TPM, 503 in flight | 0, 7, 0 |") !=
        std::string::npos);
}

TEST_CASE(
    "Promises: books later than the revision slack, those told in time, and the revisions' "
    "error") {
  Metrics m = six_books();
  // A (150 s against 100: the slack is 10 s) was told at 40 s that it would take 160 s;
  // C (30 s against 20: slack 2 s) only at 25 s, after its promise had passed; D (10 s
  // against 8: late by the slack exactly) is not later than it. E, early, was told 50 s.
  m.books[0].first_revised_s = 40.0;
  m.books[0].revised_eta_s = 160.0;
  m.books[2].first_revised_s = 25.0;
  m.books[2].revised_eta_s = 30.0;
  m.books[4].first_revised_s = 10.0;
  m.books[4].revised_eta_s = 50.0;
  m.revisions = {{"more_work_ahead", 3}, {"dispatch_paused", 1}};
  const auto f = promise_figures(m, 60.0, "");
  CHECK(f.late_over_slack == 2);  // A and C
  CHECK(f.revised_in_time == 1);  // A
  CHECK(f.notice_p50_s == doctest::Approx(60.0));
  // |actual - revised| / revised: A 10 / 160, C 0, E 10 / 50: p50 is A's.
  CHECK(f.revised == 3);
  CHECK(f.revised_error_p50 == doctest::Approx(10.0 / 160.0));

  fairlane::sim::Scenario scenario;
  scenario.fairlane.max_wait_s = 60.0;
  const std::string md = fairlane::sim::markdown_report(scenario, {m});
  INFO(md);
  CHECK(md.find("told a later finish before the promise passed | 1 of 2 (p50 60.0 s before) |") !=
        std::string::npos);
  CHECK(md.find("| 1 / 0 / 3; 3, 6.2% |") != std::string::npos);
}
