// fairlane-lab: the five ways of sending book pages to a rate-limited provider, replayed
// on loopback against the provider stand-in, with the ramp that finds where each breaks
// (docs/lab.md). Each case gets a fresh stand-in; the same users upload the same books on
// the same schedule; what happened to every page is recorded and summed up in a report.
//
// Thread safety: run_case runs one case at a time, on its own threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fairlane::lab {

enum class Case {
  one_at_a_time = 1,  // one page after another per user
  all_at_once = 2,    // every page of every book at once (Promise.all)
  token_bucket = 3,   // a per-user and a global token bucket in front; what does not fit: our 429
  fairlane = 4,       // the real `fairlane serve`
  client_pool = 5,    // a pool of 200 connections; a 30 s client timeout and one retry
};
[[nodiscard]] std::string_view case_name(Case c);

// Everything in real-world units; time_scale K multiplies every rate by K and divides every
// duration by K (the in-flight cap is a count and stays).
struct LabConfig {
  double time_scale = 1.0;
  std::vector<int> ramp{1, 2, 3, 5, 8, 12, 20, 30, 50, 80};  // users after each step
  double step_s = 3.0;
  int pages_per_book = 100;
  int page_bytes = 3'100;  // with the prompt, about 800 input tokens
  std::int64_t max_tokens = 300;
  // The provider: the lab's limits.
  std::int64_t requests_per_minute = 1'500;
  std::int64_t tokens_per_minute = 300'000;
  std::int64_t max_in_flight = 200;
  double latency_s = 2.0;
  std::int64_t output_tokens = 240;
  double price_per_mtok = 3.0;
  // Case 3.
  double user_burst = 5.0;
  double user_pages_per_s = 2.0;
  // Case 5.
  std::int64_t pool_connections = 200;
  double client_timeout_s = 30.0;
  // Case 4.
  std::string fairlane_binary;
  double max_wait_s = 600.0;  // serve's --max-wait
  // A step's users upload at once, each on a connection of its own (false: one after another,
  // each waiting for the previous answer).
  bool uploads_together = true;
  // A case that has not ended by then is cut short (its unfinished pages count as such).
  double case_deadline_s = 1'800.0;

  [[nodiscard]] double seconds(double real_world_s) const { return real_world_s / time_scale; }
  [[nodiscard]] std::int64_t per_minute(std::int64_t real_world) const {
    return static_cast<std::int64_t>(static_cast<double>(real_world) * time_scale);
  }
};

// What became of a page.
enum class Fate {
  pending,                // not ended when the case was cut short
  done,                   // answered 200 and billed
  provider_429_requests,  // the provider refused: requests per minute
  provider_429_tokens,    // the provider refused: tokens per minute
  provider_503,           // the provider refused: too many calls in flight
  our_429,                // our own limiter refused it (case 3)
  timeout,                // the client gave up (case 5, after its retry)
  failed,                 // another error (fairlane: failed after its attempts)
  door_busy,              // fairlane's door refused the book, 503 busy (case 4): never sent
  upload_refused,         // fairlane refused the upload, 4xx (case 4): never sent
  upload_error,           // the upload got no answer, a 5xx or a 503 not busy (case 4): never sent
};
[[nodiscard]] std::string_view fate_name(Fate f);

struct PageRecord {
  Fate fate = Fate::pending;
  double ended_s = 0;       // since the case started
  std::int64_t tokens = 0;  // billed
};

struct BookRecord {
  int user = 0;             // 0-based
  int users_at_upload = 0;  // how many users the ramp had reached
  double uploaded_s = 0;
  std::optional<double> eta_s;  // fairlane's promise at acceptance (case 4)
  // Case 4: from the job's created_at to its finished_at, on the service's clock (the promise,
  // eta_s, is promised_eta_at - created_at on the same clock); empty: measured here instead.
  std::optional<double> served_s;
  // The wait fairlane's door estimated when it said busy (case 4).
  std::optional<double> refused_wait_s;
  // Case 4: what came instead of a 202 for an upload refused or failed ("413
  // payload_too_large: ...", or why no answer came).
  std::string upload_answer;
  std::vector<PageRecord> pages;

  [[nodiscard]] bool clean() const;                        // every page done
  [[nodiscard]] bool refused() const;                      // the door said busy
  [[nodiscard]] bool not_uploaded() const;                 // its upload was refused or failed
  [[nodiscard]] std::optional<double> finished_s() const;  // when its last page ended, if all did
  // From its upload to its last page: served_s when the service said, else measured here.
  [[nodiscard]] std::optional<double> taken_s() const;
};

struct FirstFailure {
  double at_s = 0;
  int users = 0;
  Fate fate = Fate::pending;
};

struct CaseResult {
  Case which = Case::one_at_a_time;
  std::vector<BookRecord> books;
  double duration_s = 0;
  bool cut_short = false;
  std::optional<FirstFailure> first_failure;
  // From the stand-in.
  std::int64_t provider_requests = 0;
  std::int64_t provider_429 = 0;
  std::int64_t provider_503 = 0;
  std::int64_t peak_in_flight = 0;
  double spend_usd = 0;
  std::int64_t client_retries = 0;         // case 5: attempts begun again after the client timeout
  std::int64_t retried_after_refusal = 0;  // case 5: calls sent again after a 429 or 503
  // The busiest full minute's billed tokens over the TPM limit; none when the run had no
  // full minute (the stand-in's first and last are partial) or no TPM limit.
  std::optional<double> busiest_minute_utilisation;
  std::string error;  // set when the case could not be run at all
};

// Runs one case end to end; the report's numbers come from what it returns.
[[nodiscard]] CaseResult run_case(Case which, const LabConfig& config);

// The report: a Markdown table of every case, then notes per case.
[[nodiscard]] std::string markdown(const std::vector<CaseResult>& results, const LabConfig& config);
// Book completion time against users, one line per case, as a self-contained SVG.
[[nodiscard]] std::string svg_chart(const std::vector<CaseResult>& results,
                                    const LabConfig& config);

// The p-quantile (0..1) of `values` by nearest rank; nullopt when empty.
[[nodiscard]] std::optional<double> quantile(std::vector<double> values, double p);

// What the ramp has reached `t` seconds (scaled) into a case.
[[nodiscard]] int users_at(const LabConfig& config, double t);

}  // namespace fairlane::lab
