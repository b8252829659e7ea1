// PageTransition: one change of a page's state, as the dispatcher reports it to the store.
// Transitions are applied in batches (GroupCommit), in the order they were made, so a
// cancellation after a dispatch leaves that page in flight. Each one checks the page's
// current state and does nothing when it no longer applies (a page completed twice keeps
// its first result; a cancelled page is not dispatched).
//
// Thread safety: a value type.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "fairlane/core/ids.hpp"
#include "fairlane/store/job.hpp"

namespace fairlane {

struct PageTransition {
  enum class Kind {
    dispatched,      // queued -> in_flight; a call is made, `reserved_tokens` spent
    completed,       // in_flight -> done with `output` and `usage`
    attempt_failed,  // in_flight -> queued, one attempt spent, back off until `not_before`
                     // (-> cancelled if the job was cancelled meanwhile)
    requeued,        // in_flight -> queued at the head, no attempt spent (a provider 429)
                     // (-> cancelled if the job was cancelled meanwhile)
    failed,          // queued or in_flight -> failed for good with `error`
    job_cancelled,   // every queued page of `job_id` -> cancelled (in-flight ones finish)
  };

  Kind kind = Kind::dispatched;
  PageId page_id = 0;
  // The call a completed, attempt_failed, requeued or failed transition ends: the number
  // apply() gave its dispatched transition (1 for a page's first call). 0 means the page's
  // latest call. A transition for an older call than the latest does nothing.
  std::int64_t call = 0;
  JobId job_id = 0;                    // job_cancelled
  std::int64_t reserved_tokens = 0;    // dispatched
  std::string output;                  // completed
  Usage usage;                         // completed
  std::string error;                   // attempt_failed, failed
  std::optional<WallTime> not_before;  // attempt_failed

  static PageTransition dispatched(PageId page, std::int64_t reserved_tokens);
  static PageTransition completed(PageId page, std::string output, Usage usage,
                                  std::int64_t call = 0);
  static PageTransition attempt_failed(PageId page, std::string error, WallTime not_before,
                                       std::int64_t call = 0);
  static PageTransition requeued(PageId page, std::int64_t call = 0);
  static PageTransition failed(PageId page, std::string error, std::int64_t call = 0);
  static PageTransition job_cancelled(JobId job);
};

}  // namespace fairlane
