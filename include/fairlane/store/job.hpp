// The views of jobs and pages that the store returns: what a job object, a job list and a
// job's results show.
//
// Thread safety: value types.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fairlane/core/ids.hpp"
#include "fairlane/core/page_image.hpp"

namespace fairlane {

enum class JobState { queued, running, done, failed, cancelled };
enum class PageState { queued, in_flight, done, failed, cancelled };

// "queued", "running", ...: the names the API and the database use.
[[nodiscard]] std::string_view to_string(JobState state);
[[nodiscard]] std::string_view to_string(PageState state);
[[nodiscard]] std::optional<JobState> job_state_from(std::string_view name);
[[nodiscard]] std::optional<PageState> page_state_from(std::string_view name);

// done, failed and cancelled: a job in one of these has ended and will not change state.
[[nodiscard]] constexpr bool is_terminal(JobState state) {
  return state == JobState::done || state == JobState::failed || state == JobState::cancelled;
}

struct PageCounts {
  std::int64_t total = 0;
  std::int64_t queued = 0;
  std::int64_t in_flight = 0;
  std::int64_t done = 0;
  std::int64_t failed = 0;
  std::int64_t cancelled = 0;
  // Of `total`, fixed at creation: the pages sent as images, and the blank ones (counted in
  // `done` from the start: they make no call).
  std::int64_t images = 0;
  std::int64_t blank = 0;
};

// Provider-reported tokens.
struct Usage {
  std::int64_t input_tokens = 0;
  std::int64_t output_tokens = 0;
};

struct JobView {
  JobId id = 0;           // internal
  std::string public_id;  // what users see and pass back
  UserId user_id = 0;
  std::string user_name;
  std::string name;
  JobState state = JobState::queued;
  PageCounts pages;
  Usage usage;
  double cost_usd = 0.0;  // usage at the store's configured price
  std::int64_t max_tokens = 0;
  WallTime created_at;
  std::optional<WallTime> started_at;
  std::optional<WallTime> finished_at;
  // When the door said it would be done, and, once that could not be kept, the later finish
  // announced and why.
  std::optional<WallTime> promised_eta_at;
  std::optional<WallTime> eta_revised_at;
  std::optional<std::string> eta_revised_reason;
};

// One page of a job's results, in page order.
struct PageResult {
  std::int64_t seq = 0;  // 0-based position in the job
  PageState state = PageState::queued;
  std::optional<std::string> output;  // done pages
  std::optional<std::string> error;   // failed pages, or the last failed attempt
  Usage usage;
  std::int64_t attempts = 0;
  PageKind kind = PageKind::text;  // blank: done with an empty output, no call made
};

}  // namespace fairlane
