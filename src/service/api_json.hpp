// The HTTP API's bodies (DESIGN.md section 7), as pure functions: the job object, the error
// object, and the one table from a Status or a door decision to an HTTP status. The HTTP
// server only reads requests and writes what these return.
#pragma once

#include <boost/json/object.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "fairlane/core/door.hpp"
#include "fairlane/core/estimator.hpp"
#include "fairlane/core/status.hpp"
#include "fairlane/store/job.hpp"

namespace fairlane::service {

// "2026-11-29T14:03:07.250Z": UTC with milliseconds.
[[nodiscard]] std::string iso_time(WallTime t);

// The job object: id, name, user, state, pages, position, eta_seconds, usage, created_at,
// finished_at. Position and ETA are those of its queued pages (0 and the time left for
// its calls in flight when none is queued, null once it has ended).
[[nodiscard]] boost::json::object job_json(const JobView& job, std::optional<JobEstimate> estimate,
                                           double avg_latency_s);

// {"error": {"type": ..., "message": ...}}.
[[nodiscard]] boost::json::object error_json(std::string_view type, std::string_view message);

// An HTTP answer: status, body, and a Retry-After when there is one. `detail`, when set, is
// for the operator's log and never sent: what a failure on the service's side really was.
struct ApiAnswer {
  int status = 200;
  boost::json::object body;
  std::optional<std::int64_t> retry_after_s;
  std::string detail = {};
};

// The one table from a Status to an HTTP answer: invalid_argument 400, payload_too_large 413
// (its type the code's name), not_found 404,
// already_exists 409, busy 503 (Retry-After 1), disk_full 507, read_only / io_error 503,
// unavailable 503 (Retry-After 5), corrupt / version_too_new / internal 500. What the
// caller can mend (4xx) is said in the Status's words. A failure on the service's side
// (busy and 5xx) is said in the caller's terms, what happened and what the caller can do,
// and the Status's words, which name the store's server or file and the operator's remedy,
// go to `detail`.
[[nodiscard]] ApiAnswer answer_for(const Status& status);

// What the door was asked about: a job, or, from an upload's headers before its pages are
// known, one page, refused only if even that would be (so the upload, whatever its size).
enum class Refused { job, any_page };

// What the door's refusals look like: busy 503 with position, estimated_wait_seconds,
// max_wait_seconds, retry_after_seconds and Retry-After; user_queue_full 429;
// request_too_large 422 naming the page, its tokens and the ceiling. nullopt for accepted.
// Of `any_page`, the words say that no page would be taken, not what a one-page job is told.
[[nodiscard]] std::optional<ApiAnswer> answer_for(const DoorDecision& decision,
                                                  Refused of = Refused::job);

// The error type a refusal answers with ("busy", "user_queue_full", "request_too_large"),
// empty when the door accepted.
[[nodiscard]] std::string_view refusal_reason(const DoorDecision& decision);

// The most output tokens an upload may ask per page; the door's 422 catches a page whose
// input and output pass a minute's TPM, this catches nonsense before that.
inline constexpr std::int64_t kMaxTokensCeiling = 1'000'000;

// 400 invalid_request for a max_tokens that is not 1 to kMaxTokensCeiling, naming the
// service's default.
[[nodiscard]] ApiAnswer bad_max_tokens(std::int64_t default_max_tokens);

// The body of an upload of pages as JSON: {"name": ..., "pages": ["text", ...],
// "max_tokens": N}, name and max_tokens optional.
struct JsonUpload {
  std::optional<std::string> name;         // when "name" is a string (anything else: ignored)
  std::optional<std::int64_t> max_tokens;  // 1 to kMaxTokensCeiling
  std::vector<std::string> pages;          // the texts, in order; may be empty
};

// Reads a JSON upload's body, or the 400 it gets: invalid_document when it is not JSON,
// has no list of pages or a page that is not text; bad_max_tokens(default_max_tokens) for a
// max_tokens that is not a whole number 1 to kMaxTokensCeiling; and 413 payload_too_large
// for more than `max_pages` pages (0: any number). Read as a stream (json_upload.cpp): no
// document is built and no page past `max_pages` kept, so a body of empty pages, three
// bytes a page, costs no more than itself. Untrusted bytes: any input gets one of these.
[[nodiscard]] std::variant<JsonUpload, ApiAnswer> parse_json_upload(std::string_view body,
                                                                    std::int64_t default_max_tokens,
                                                                    std::int64_t max_pages = 0);

}  // namespace fairlane::service
