// The crash test's total-queue check, in the manner of Jepsen's: what was sent (the uploads,
// and what each kill found) against what the service and the provider stand-in hold at the
// end. A pure function of its arguments, so tests can feed it ledgers that are wrong.
//
// Thread safety: pure functions; the types are plain values.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace fairlane::crashtest {

// One upload (a book) as the crash test sent it, through every retry.
struct UploadRecord {
  std::string user;                    // the user's name
  int book = 0;                        // 1-based, per user
  int pages = 0;                       // pages in the book
  bool pdf = false;                    // sent as a PDF (else JSON pages)
  std::string key;                     // its Idempotency-Key, the same on every retry
  std::vector<std::string> texts;      // the pages' texts (a PDF's as written into it)
  std::optional<std::string> job_id;   // the job of the 202, when one came
  bool abandoned = false;              // cut by a kill and, on purpose, never sent again
  int attempts = 0;                    // requests sent
  int cut = 0;                         // requests a kill cut short
  std::optional<std::string> refused;  // an answer that is not "later": the body
  int failed_without_kill = 0;         // requests that failed with no kill to explain it
  std::string last_error;              // the last such failure
};

// What one kill found while `fairlane serve` was down.
struct KillRecord {
  double at_s = 0.0;                    // since the start
  std::string aimed_at;                 // upload, dispatch or completion: what it waited for
  bool upload = false;                  // an upload request was open when it landed
  bool dispatch = false;                // a page in flight had its call sent or at the stand-in
  bool completion = false;              // a page's call was answered, its result not committed
  std::set<std::string> in_flight;      // texts of the pages in flight in the database
  std::int64_t calls_open = 0;          // calls of this run of serve open at the stand-in
  std::int64_t open_not_in_flight = 0;  // of those, pages the database did not have in flight
  std::int64_t partial_jobs = 0;        // jobs with fewer or more pages than their page_count
  std::string integrity;                // what PRAGMA integrity_check said ("ok")
};

// A job as the database holds it at the end.
struct JobRow {
  std::string public_id;
  std::string user;
  std::string idempotency_key;
  std::int64_t page_count = 0;
  std::int64_t page_rows = 0;
};

// A page as the database holds it at the end.
struct PageRow {
  std::string job_id;
  std::int64_t seq = 0;  // 0-based
  std::string state;
  std::string text;
  std::optional<std::string> output;
};

// A page as GET /v1/jobs/{id}/result shows it.
struct ResultPage {
  std::string job_id;
  std::int64_t page = 0;  // 1-based
  std::string state;
  std::string output;
};

struct Observed {
  std::vector<JobRow> jobs;                                     // every job in the database
  std::vector<PageRow> pages;                                   // every page in the database
  std::vector<ResultPage> results;                              // every job's result, via the API
  std::unordered_map<std::string, std::int64_t> calls_by_text;  // the stand-in's calls
  std::string final_integrity;                                  // after the last stop
};

struct Findings {
  std::int64_t uploads = 0, accepted = 0, abandoned = 0, abandoned_committed = 0;
  std::int64_t retried = 0, cut = 0;
  std::int64_t expected_pages = 0;   // of the uploads answered 202
  std::int64_t abandoned_pages = 0;  // of the abandoned uploads committed whole
  std::int64_t done_pages = 0;
  std::int64_t lost = 0, duplicated = 0, unexpected = 0, wrong_outputs = 0;
  std::int64_t jobs = 0, partial_jobs = 0, jobs_without_upload = 0, second_jobs = 0;
  std::int64_t calls = 0, extra_calls = 0, in_flight_at_kills = 0, pages_over_bound = 0;
  std::int64_t calls_for_no_page = 0;
  std::int64_t integrity_checks = 0, integrity_failures = 0;
  std::vector<std::string> problems;  // every failed check, as a sentence (the first 20)

  [[nodiscard]] bool ok() const { return problems.empty(); }
};

Findings check(const std::vector<UploadRecord>& uploads, const std::vector<KillRecord>& kills,
               const Observed& observed);

}  // namespace fairlane::crashtest
