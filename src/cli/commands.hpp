// The `fairlane` client commands (enqueue, watch, status, result, cancel, estimate): each
// talks HTTP to the service, prints for people (stdout) and errors (stderr), and returns
// the process's exit status (README.md, "Exit codes").
//
// Thread safety: one command at a time.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/http_client.hpp"

namespace fairlane::cli {

// Exit statuses of every `fairlane` command, documented in README.md.
constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;       // the command could not do its job (service unreachable, 5xx)
constexpr int kExitUsage = 2;         // the command line itself is wrong
constexpr int kExitBusy = 3;          // the service said "later": busy (503) or queue full (429)
constexpr int kExitRejected = 4;      // the input was refused (400, 413, 415, 422): fix it
constexpr int kExitUnauthorized = 5;  // no key, an unknown key (401), a key not allowed (403)
constexpr int kExitNotFound = 6;      // no such job, or not yours (404)
constexpr int kExitJobFailed = 7;     // watch: a job ended failed or cancelled

// The exit status for an HTTP answer that is not a success.
[[nodiscard]] int exit_code_for(long http_status);

// Where a command prints.
struct Output {
  std::ostream& out;
  std::ostream& err;
  bool terminal = false;  // stdout is a terminal: live redraws instead of one line per update
  // The terminal's width in cells now (0 or null: unknown), asked at every redraw.
  std::size_t (*columns)() = nullptr;
};

struct EnqueueOptions {
  std::vector<std::string> files;         // PDFs
  std::optional<std::string> pages_json;  // a file of {"name", "pages": [...]} instead
  std::optional<std::string> name;        // the job's name (one file only)
  std::optional<std::int64_t> max_tokens;
  std::optional<std::string> idempotency_key;
};

// What is wrong with an --idempotency-key, as a sentence naming the remedy; nothing when it
// is what the service takes (1 to 255 bytes of UTF-8 text without control characters) and
// not only spaces. An empty or blank key would not be sent at all: libcurl drops a header
// with nothing after its colon.
[[nodiscard]] std::optional<std::string> idempotency_key_problem(std::string_view key);

// Uploads each file; prints the door's answer for each. `accepted` gets the jobs' ids.
int enqueue(HttpClient& client, const EnqueueOptions& options, const Output& output,
            std::vector<std::string>& accepted);

// Follows the jobs' live events until every one has ended; then prints the summary.
int watch(HttpClient& client, const std::vector<std::string>& jobs, const Output& output);

int status(HttpClient& client, const Output& output);

// The result as Markdown (or the service's JSON), to `file` or stdout.
int result(HttpClient& client, const std::string& job, const std::optional<std::string>& file,
           bool as_json, const Output& output);

int cancel(HttpClient& client, const std::string& job, const Output& output);

int estimate(HttpClient& client, std::int64_t pages, std::optional<std::int64_t> tokens_per_page,
             const Output& output);

}  // namespace fairlane::cli
