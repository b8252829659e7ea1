// `fairlane serve`: the service (store, provider client, dispatcher, API, HTTP server) on
// one io_context until SIGTERM or SIGINT.
#pragma once

#include <cstdint>
#include <string>

namespace fairlane::cli {

struct ServeOptions {
  std::string listen = "127.0.0.1:8080";
  std::string db = "fairlane.db";
  std::string provider_url;
  std::string provider_dialect = "openai";
  std::string model = "default";
  std::string api_key_env;
  std::string admin_key_env = "FAIRLANE_ADMIN_KEY";
  std::string prompt = "Extract the text of this page and structure it as Markdown.";
  std::int64_t rpm = 1'500;
  std::int64_t tpm = 300'000;
  std::int64_t max_in_flight = 200;
  std::int64_t max_tokens = 1'000;
  double max_wait = 60.0;
  double max_job_seconds = 0.0;  // 0: no limit
  double promise_window = 0.25;  // seconds a 202 waits for the uploads that come with it
  // promises: fair order, but a job whose promise is at risk takes the turns of newer work
  // (PromiseOrder); fair: plain deficit round robin, promises only revised.
  std::string order = "promises";
  std::int64_t max_attempts = 5;
  std::int64_t max_queued_pages_per_user = 10'000;
  std::int64_t max_body_mb = 100;
  std::int64_t max_receiving_mb = 1'000;  // upload bodies on their way at once
  std::int64_t max_header_kb = 16;        // a request's headers
  std::int64_t max_pages = 10'000;        // pages in one upload
  std::int64_t max_page_kb = 64;          // text in one page
  std::int64_t max_connections = 1'000;   // connections open at once
  double read_timeout = 60.0;             // seconds for a whole request to arrive
  double write_timeout = 30.0;            // seconds a client may take none of an answer
  double stop_deadline = 30.0;
  double backoff_base = 1.0;
  double backoff_max = 60.0;
  double call_timeout = 120.0;  // seconds a provider call may take before it is given up
  double heartbeat = 15.0;
  double price_per_mtok = 0.0;
  double pdf_timeout = 60.0;          // seconds a PDF's reader may take (and of CPU)
  std::int64_t pdf_memory_mb = 2048;  // memory a PDF's reader may use
  std::string page_input = "auto";    // auto|text|image: how a PDF's pages go to the provider
  double render_dpi = 150.0;          // the resolution pages are rendered at, as images
  // A cluster's (--db postgresql://...): this instance's id (empty: host name and process
  // id), and the lease's length, the bound on a takeover after the leader's death.
  std::string instance;
  double lease_s = 5.0;
  // Connections (and threads) that read job views, lists, results and live events, and
  // commit uploads, off the io thread, on PostgreSQL; 0: all on the io thread.
  std::int64_t db_readers = 2;
  // Seconds after which a finished job is pruned, with its pages (0: never; else at least
  // an hour, kMinRetention).
  double retain = 0.0;
};

// Runs the service; returns the exit status (README.md, "Exit codes").
int serve(const ServeOptions& options);

}  // namespace fairlane::cli
