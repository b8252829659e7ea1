// fairlane-crashtest: SIGKILLs `fairlane serve` at random moments while users upload books
// and the dispatcher drains them to the provider stand-in (in this process, without
// faults), restarts it on the same database each time until everything has ended, then
// checks that nothing was lost or duplicated (check.hpp). docs/reliability.md, "Crash tests".
//
// Thread safety: run() is called once, from one thread; it starts and joins its own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "check.hpp"

namespace fairlane::crashtest {

struct Config {
  std::string fairlane;           // the `fairlane` binary
  std::uint64_t seed = 1;         // the kills' moments and the uploads' choices
  int kills = 5;                  // SIGKILLs of `fairlane serve`
  int users = 3;                  // users uploading at once
  int books = 3;                  // per user
  int pages = 8;                  // per book
  int pdf_every = 3;              // every Nth book of a user is sent as a PDF (0: none)
  double abandon = 0.25;          // share of uploads cut by a kill that are not sent again
  int max_in_flight = 4;          // serve's --max-in-flight
  double latency_ms = 150.0;      // the stand-in's time to answer a call
  double kill_gap_s = 0.6;        // mean time from a restart to the next kill's aim
  double upload_gap_s = 0.5;      // mean pause between a user's books
  double deadline_s = 600.0;      // the whole run; past it, the run fails
  std::string db;                 // serve's --db; empty: a SQLite file in the work folder
  double lease_s = 1.0;           // serve's --lease-s, on PostgreSQL only
  double call_timeout_s = 0.0;    // serve's --call-timeout; 0: serve's default
  std::string work_dir;           // serve.log (and the SQLite file); empty: a temporary folder
  bool keep = false;              // keep the work folder even when every check holds
  bool require_landings = false;  // fail unless kills landed in upload, dispatch and completion
};

struct Summary {
  Findings findings;
  std::vector<KillRecord> kills;
  std::vector<UploadRecord> uploads;
  int starts = 0;      // runs of `fairlane serve`
  int last_exit = -1;  // the last run's exit status after SIGTERM
  double duration_s = 0.0;
  std::int64_t rejected = 0;  // the stand-in's 429s and 503s (no limits: expected 0)
  std::string work_dir;
  std::string error;  // the run could not be carried out (not a check)

  [[nodiscard]] bool ok() const { return error.empty() && findings.ok() && last_exit == 0; }
};

Summary run(const Config& config);

// The summary as plain text (for the terminal) and as Markdown (--report).
std::string summary_text(const Config& config, const Summary& summary);
std::string summary_markdown(const Config& config, const Summary& summary,
                             const std::string& command);

}  // namespace fairlane::crashtest
