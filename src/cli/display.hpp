// What the `fairlane` client commands print, as pure functions of the service's answers:
// the job object read into a JobStatus, a job's progress line (with a bar on a terminal),
// the jobs table of `status`, the end-of-watch summary, and a result as Markdown.
//
// Thread safety: pure functions.
#pragma once

#include <boost/json/fwd.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fairlane/core/result.hpp"

namespace fairlane::cli {

// The job object of the API (docs/api.md), as the client reads it.
struct JobStatus {
  std::string id;
  std::string name;
  std::string state;  // queued, running, done, failed, cancelled
  std::int64_t total = 0;
  std::int64_t queued = 0;
  std::int64_t in_flight = 0;
  std::int64_t done = 0;
  std::int64_t failed = 0;
  std::int64_t cancelled = 0;
  std::int64_t images = 0;               // of total, the pages sent as images
  std::int64_t blank = 0;                // of total, the blank pages (no call)
  std::optional<std::int64_t> position;  // absent once the job has ended
  std::optional<double> eta_s;
  std::int64_t input_tokens = 0;
  std::int64_t output_tokens = 0;
  double cost_usd = 0.0;
  std::string created_at;  // RFC 3339
  std::optional<std::string> finished_at;
  std::string promised_eta_at;     // RFC 3339; empty when the door promised nothing
  std::string eta_revised_at;      // empty until the promise was revised
  std::string eta_revised_reason;  // why it was

  [[nodiscard]] bool ended() const {
    return state == "done" || state == "failed" || state == "cancelled";
  }
};

// Reads a job object; invalid_argument naming what is missing when it is not one.
[[nodiscard]] Result<JobStatus> parse_job(std::string_view text);
[[nodiscard]] Result<JobStatus> job_from(const boost::json::value& value);

// "0.4 s", "42 s", "3m 20s", "2h 05m".
[[nodiscard]] std::string format_duration(double seconds);

// "[#########...........]": done (and failed) pages of the total, `width` cells inside.
[[nodiscard]] std::string progress_bar(std::int64_t ended, std::int64_t total, int width);

// One job's progress. On a terminal: name, bar, done/total, failed, position, the ETA
// counted down from the last event, pages a minute. Elsewhere the same facts as one plain
// line ("book.pdf: 12/100 done, 0 failed, position 40, eta 1m 10s, 9.5 pages/min").
// `eta_s` is the ETA now (the event's, less the time since), `pages_per_min` the job's rate
// (pages_per_minute; "- pages/min" when there is none yet).
[[nodiscard]] std::string progress_line(const JobStatus& job, std::optional<double> eta_s,
                                        std::optional<double> pages_per_min, bool terminal);

// A job's rate: its pages done over the time from its upload (created_at) to its end
// (finished_at, the service's clock) or, while it runs, to `now_epoch_s` (this machine's
// wall clock, seconds since the Unix epoch). A job that ended between two updates keeps the
// rate it had. nullopt when the times cannot be read or less than a millisecond has passed.
[[nodiscard]] std::optional<double> pages_per_minute(const JobStatus& job, double now_epoch_s);

// `text` safe to write to a terminal: escape sequences (ESC [ ... final, ESC ] ... BEL or
// ESC \, the other string sequences, ESC and one byte) and their 8-bit C1 forms are dropped
// whole, and so is every other control character but newline and tab (C0, DEL, C1). Bytes
// that are not controls, UTF-8 included, are kept.
[[nodiscard]] std::string for_terminal(std::string_view text);

// Text from the service (a job's name, a failure's reason, which come from whoever uploaded
// it and from the provider) for one line of a display: no escape sequence nor control
// character (for_terminal), and newlines and tabs as spaces, so that a line watch redraws
// in place stays one line.
[[nodiscard]] std::string one_line(std::string_view text);

// `line` cut to fit `columns` terminal cells (0: as it is), leaving the last one free: a line
// watch redraws in place must not wrap, or the redraw climbs too few rows and the screen
// fills with copies. Cut by bytes, at a UTF-8 character's start: a character takes at most
// as many cells as it has bytes, so what is left fits.
[[nodiscard]] std::string cut_to_columns(std::string_view line, std::size_t columns);

// `status`: one row per job, newest first, with aligned columns.
[[nodiscard]] std::string jobs_table(const std::vector<JobStatus>& jobs);

// The end of a watch: per job its state, time taken, tokens, cost, and each failed page
// with its reason (`failures`: "page N: reason" lines, by job id order of `jobs`).
struct JobSummary {
  JobStatus job;
  double seconds = 0.0;               // from its upload to its end
  std::vector<std::string> failures;  // "page 7: the provider answered 500 five times"
};
[[nodiscard]] std::string summary(const std::vector<JobSummary>& jobs);

// The failed pages of a result (GET /v1/jobs/{id}/result) as "page N: reason" lines, in its
// order. Read defensively: an entry that is not an object is skipped, a page number or a
// reason of another type reads as "?" or "(no reason given)"; not a result, none.
[[nodiscard]] std::vector<std::string> failed_pages(const boost::json::value& result);

// A result (GET /v1/jobs/{id}/result) as Markdown: a title, then each page under
// "## Page N", its output, or its state and error when it has none.
[[nodiscard]] std::string result_markdown(const boost::json::value& result, std::string_view name);

// Seconds between two RFC 3339 times of the API ("2026-11-29T14:03:07.250Z"); nullopt
// when either cannot be read.
[[nodiscard]] std::optional<double> seconds_between(std::string_view from, std::string_view to);

// Seconds since the Unix epoch of one of the API's times; nullopt when it cannot be read.
[[nodiscard]] std::optional<double> epoch_seconds(std::string_view text);

}  // namespace fairlane::cli
