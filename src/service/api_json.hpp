// The HTTP API's bodies (DESIGN.md section 7), as pure functions: the job object, the error
// object, and the one table from a Status or a door decision to an HTTP status. The HTTP
// server only reads requests and writes what these return.
#pragma once

#include <boost/json/object.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "fairlane/door.hpp"
#include "fairlane/estimator.hpp"
#include "fairlane/job.hpp"
#include "fairlane/status.hpp"

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

// An HTTP answer: status, body, and a Retry-After when there is one.
struct ApiAnswer {
  int status = 200;
  boost::json::object body;
  std::optional<std::int64_t> retry_after_s;
};

// The one table from a Status to an HTTP answer: invalid_argument 400, not_found 404,
// already_exists 409, busy 503 (Retry-After 1), disk_full 507, read_only / io_error 503,
// corrupt / version_too_new / internal 500.
[[nodiscard]] ApiAnswer answer_for(const Status& status);

// What the door's refusals look like: busy 503 with position, estimated_wait_seconds,
// max_wait_seconds, retry_after_seconds and Retry-After; user_queue_full 429;
// request_too_large 422 naming the page, its tokens and the ceiling. nullopt for accepted.
[[nodiscard]] std::optional<ApiAnswer> answer_for(const DoorDecision& decision);

// The error type a refusal answers with ("busy", "user_queue_full", "request_too_large"),
// empty when the door accepted.
[[nodiscard]] std::string_view refusal_reason(const DoorDecision& decision);

}  // namespace fairlane::service
