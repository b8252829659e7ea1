// The crash test's total-queue check on hand-made ledgers: a clean one passes, and each
// kind of damage (a lost page, a second job, a partial job, a call no kill explains, a
// damaged database) is found and counted.
#include "check.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace ct = fairlane::crashtest;

namespace {

// Two JSON books of two pages, both answered 202, every page done once with its own text.
struct Ledger {
  std::vector<ct::UploadRecord> uploads;
  std::vector<ct::KillRecord> kills;
  ct::Observed observed;

  Ledger() {
    for (int b = 1; b <= 2; ++b) {
      ct::UploadRecord u;
      u.user = "user-1";
      u.book = b;
      u.pages = 2;
      u.key = "key-" + std::to_string(b);
      u.texts = {text(b, 1), text(b, 2)};
      u.job_id = job(b);
      u.attempts = 1;
      uploads.push_back(u);
      observed.jobs.push_back(ct::JobRow{job(b), "user-1", u.key, 2, 2});
      for (int p = 1; p <= 2; ++p) {
        observed.pages.push_back(ct::PageRow{job(b), p - 1, "done", text(b, p), text(b, p)});
        observed.results.push_back(ct::ResultPage{job(b), p, "done", text(b, p)});
        observed.calls_by_text[text(b, p)] = 1;
      }
    }
    ct::KillRecord kill;
    kill.integrity = "ok";
    kills.push_back(kill);
    observed.final_integrity = "ok";
  }

  static std::string text(int book, int page) {
    return "book " + std::to_string(book) + " page " + std::to_string(page);
  }
  static std::string job(int book) { return "job_" + std::to_string(book); }

  ct::Findings check() const { return ct::check(uploads, kills, observed); }
};

}  // namespace

TEST_CASE("A clean ledger passes with every page done once and no extra call") {
  const auto f = Ledger().check();
  CHECK(f.ok());
  CHECK(f.expected_pages == 4);
  CHECK(f.done_pages == 4);
  CHECK(f.lost == 0);
  CHECK(f.duplicated == 0);
  CHECK(f.unexpected == 0);
  CHECK(f.calls == 4);
  CHECK(f.extra_calls == 0);
  CHECK(f.integrity_checks == 2);
}

TEST_CASE("A page of a 202 that is not done in the results is lost") {
  Ledger ledger;
  ledger.observed.results[1].state = "queued";
  const auto f = ledger.check();
  CHECK_FALSE(f.ok());
  CHECK(f.lost == 1);
  CHECK(f.done_pages == 3);
}

TEST_CASE("A retried upload that became a second job duplicates its pages") {
  Ledger ledger;
  // The same Idempotency-Key stored twice (the schema forbids it; the check must not rely
  // on that): its pages come back twice.
  ledger.observed.jobs.push_back(ct::JobRow{"job_9", "user-1", "key-1", 2, 2});
  for (int p = 1; p <= 2; ++p) {
    ledger.observed.results.push_back(ct::ResultPage{"job_9", p, "done", Ledger::text(1, p)});
  }
  const auto f = ledger.check();
  CHECK_FALSE(f.ok());
  CHECK(f.second_jobs == 1);
  CHECK(f.duplicated == 2);
  CHECK(f.lost == 0);
}

TEST_CASE("A job with fewer pages than it was sent, or of no upload, is found") {
  Ledger ledger;
  ledger.observed.jobs[0].page_rows = 1;
  ledger.observed.jobs.push_back(ct::JobRow{"job_7", "user-1", "nobody-sent-this", 1, 1});
  const auto f = ledger.check();
  CHECK_FALSE(f.ok());
  CHECK(f.partial_jobs == 1);
  CHECK(f.jobs_without_upload == 1);
}

TEST_CASE("A page whose output is another page's text is a wrong output") {
  Ledger ledger;
  ledger.observed.results[0].output = Ledger::text(2, 2);
  const auto f = ledger.check();
  CHECK_FALSE(f.ok());
  CHECK(f.wrong_outputs == 1);
}

TEST_CASE("PDF books whose pages came back as each other's are wrong outputs") {
  // Every generated book's page K starts "Page K of N", so a result that only starts so
  // passed when two PDFs' pages were crossed. A PDF's page is its text as the reader
  // extracted it, its lines wrapped elsewhere: it must hold its own page's words.
  Ledger ledger;
  for (int b = 0; b < 2; ++b) {
    auto& u = ledger.uploads[static_cast<std::size_t>(b)];
    u.pdf = true;
    for (int p = 0; p < 2; ++p) {
      u.texts[static_cast<std::size_t>(p)] =
          "Page " + std::to_string(p + 1) + " of 2\n\nBook " + std::to_string(b + 1) +
          " says its own words here, page " + std::to_string(p + 1) + ".\n";
    }
  }
  const auto extracted = [&](int book, int page) {  // wrapped elsewhere, as a reader would
    return "Page " + std::to_string(page) + " of 2\nBook " + std::to_string(book) +
           " says its own\nwords here, page " + std::to_string(page) + ".";
  };
  for (auto& result : ledger.observed.results) {
    const int book = result.job_id == Ledger::job(1) ? 1 : 2;
    result.output = extracted(book, static_cast<int>(result.page));
  }
  CHECK(ledger.check().wrong_outputs == 0);
  // Crossed: book 1's results hold book 2's pages and the other way round.
  for (auto& result : ledger.observed.results) {
    const int book = result.job_id == Ledger::job(1) ? 2 : 1;
    result.output = extracted(book, static_cast<int>(result.page));
  }
  CHECK(ledger.check().wrong_outputs == 4);
}

TEST_CASE("An extra call is allowed once per kill that found the page in flight, and no more") {
  Ledger ledger;
  ledger.observed.calls_by_text[Ledger::text(1, 1)] = 2;
  SUBCASE("no kill found it in flight: over the bound") {
    const auto f = ledger.check();
    CHECK_FALSE(f.ok());
    CHECK(f.extra_calls == 1);
    CHECK(f.pages_over_bound == 1);
  }
  SUBCASE("one kill found it in flight: within the bound") {
    ledger.kills[0].in_flight.insert(Ledger::text(1, 1));
    const auto f = ledger.check();
    CHECK(f.ok());
    CHECK(f.extra_calls == 1);
    CHECK(f.in_flight_at_kills == 1);
  }
  SUBCASE("one kill, but three calls: over the bound") {
    ledger.kills[0].in_flight.insert(Ledger::text(1, 1));
    ledger.observed.calls_by_text[Ledger::text(1, 1)] = 3;
    const auto f = ledger.check();
    CHECK_FALSE(f.ok());
    CHECK(f.pages_over_bound == 1);
  }
}

TEST_CASE("An abandoned upload may leave no job or a whole one, never a part") {
  Ledger ledger;
  ledger.uploads[1].job_id.reset();
  ledger.uploads[1].abandoned = true;
  SUBCASE("committed whole before the kill: allowed, its pages done once") {
    const auto f = ledger.check();
    CHECK(f.ok());
    CHECK(f.abandoned == 1);
    CHECK(f.abandoned_committed == 1);
    CHECK(f.expected_pages == 2);
    CHECK(f.abandoned_pages == 2);
  }
  SUBCASE("committed whole, then a page of it not done: lost") {
    ledger.observed.results[3].state = "queued";
    const auto f = ledger.check();
    CHECK_FALSE(f.ok());
    CHECK(f.lost == 1);
  }
  SUBCASE("absent: allowed") {
    ledger.observed.jobs.pop_back();
    ledger.observed.results.resize(2);
    ledger.observed.pages.resize(2);
    ledger.observed.calls_by_text.erase(Ledger::text(2, 1));
    ledger.observed.calls_by_text.erase(Ledger::text(2, 2));
    const auto f = ledger.check();
    CHECK(f.ok());
    CHECK(f.abandoned_committed == 0);
  }
  SUBCASE("a part: found") {
    ledger.observed.jobs[1].page_rows = 1;
    CHECK(ledger.check().partial_jobs == 1);
  }
}

TEST_CASE(
    "A failed integrity check, a partial job at a kill, or a call the database did not "
    "have in flight fails the run") {
  Ledger ledger;
  SUBCASE("integrity") {
    ledger.kills[0].integrity = "*** in database main *** Page 7: btreeInitPage() returns error";
    const auto f = ledger.check();
    CHECK(f.integrity_failures == 1);
    CHECK_FALSE(f.ok());
  }
  SUBCASE("partial at a kill") {
    ledger.kills[0].partial_jobs = 1;
    CHECK_FALSE(ledger.check().ok());
  }
  SUBCASE("a call before its dispatch was committed") {
    ledger.kills[0].open_not_in_flight = 1;
    CHECK_FALSE(ledger.check().ok());
  }
}

TEST_CASE("An upload request that failed with no kill to explain it fails the run") {
  Ledger ledger;
  ledger.uploads[0].failed_without_kill = 1;
  ledger.uploads[0].last_error = "Connection reset by peer";
  const auto f = ledger.check();
  CHECK_FALSE(f.ok());
  REQUIRE(f.problems.size() == 1);
  CHECK(f.problems[0].find("Connection reset by peer") != std::string::npos);
}
