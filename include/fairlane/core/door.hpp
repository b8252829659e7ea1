// Door: the decision at upload time, made before anything is stored. A job is refused at
// once, with a reason the caller can act on, when
//   - one of its pages needs more tokens than a whole minute's TPM (no wait can fit it),
//   - the job alone would take longer than max_job_s (no wait helps either: split it),
//   - its user would have more than max_queued_pages_per_user pages queued, or
//   - the wait the queue adds exceeds max_wait, where
//       wait = eta_seconds - own_seconds
//     (the ETA of its last page, minus the job's own time were nothing else queued;
//     DESIGN.md section 5): a big book on an idle service waits for nothing,
// in that order; otherwise it is accepted with its position and ETA. Busy's Retry-After is
// when the estimate says the job would fit: the wait's excess over max_wait, at least 1 s.
//
// Thread safety: none, by design; it reads the scheduler and estimator on their thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <variant>

#include "fairlane/core/estimator.hpp"
#include "fairlane/core/fair_scheduler.hpp"
#include "fairlane/core/ids.hpp"

namespace fairlane {

struct DoorConfig {
  double max_wait_s = 60.0;
  std::int64_t max_queued_pages_per_user = 10'000;
  std::int64_t tokens_per_minute = 0;  // the ceiling for one page; 0 = none
  double max_job_s = 0.0;              // the longest a job may take alone; 0 = no limit
};

struct DoorAccepted {
  JobEstimate estimate;
};

// 503: the job would wait longer than max_wait. Come back after retry_after_s.
struct DoorBusy {
  std::int64_t position = 0;
  double estimated_wait_s = 0.0;  // what the queue would add: eta - own time
  double max_wait_s = 0.0;
  std::int64_t retry_after_s = 1;
  double eta_s = 0.0;  // when it would finish, from now
};

// 422: the job alone would take longer than max_job_s; parts of max_pages pages would not.
struct DoorJobTooLarge {
  std::int64_t pages = 0;
  double alone_s = 0.0;
  double max_job_s = 0.0;
  // The most pages a job may have, at its pages' size; 0 when not even one page fits (the
  // limit is below a call's own time: no split helps).
  std::int64_t max_pages = 0;
  std::int64_t parts = 0;  // ceil(pages / max_pages); 0 with max_pages
};

// 429: the user already has too much queued.
struct DoorUserQueueFull {
  std::int64_t queued = 0;  // pages the user has queued now
  std::int64_t adding = 0;  // pages this job would add
  std::int64_t limit = 0;
};

// 422: a page can never fit in the provider's token budget.
struct DoorRequestTooLarge {
  std::int64_t page = 0;  // 1-based
  std::int64_t tokens = 0;
  std::int64_t ceiling = 0;
};

using DoorDecision =
    std::variant<DoorAccepted, DoorBusy, DoorUserQueueFull, DoorRequestTooLarge, DoorJobTooLarge>;

class Door {
 public:
  // `scheduler` and `estimator` must outlive the door.
  Door(const FairScheduler& scheduler, const Estimator& estimator, const DoorConfig& config);

  // What the door says to a job of `user` whose pages are estimated at `page_tokens`
  // (input + max_tokens each). Changes nothing: the caller enqueues on DoorAccepted.
  [[nodiscard]] DoorDecision admit(UserId user, std::span<const std::int64_t> page_tokens) const;

  // The same for `pages` pages of `tokens_per_page` each (GET /v1/estimate).
  [[nodiscard]] DoorDecision estimate(UserId user, std::int64_t pages,
                                      std::int64_t tokens_per_page) const;

  [[nodiscard]] const DoorConfig& config() const { return config_; }

 private:
  // DoorJobTooLarge when `pages` of `tokens_per_page` from `user` alone exceed max_job_s.
  [[nodiscard]] std::optional<DoorJobTooLarge> too_long(UserId user, std::int64_t pages,
                                                        std::int64_t tokens_per_page) const;
  [[nodiscard]] DoorDecision decide(UserId user, std::int64_t pages, std::int64_t tokens_per_page,
                                    std::int64_t largest_page,
                                    std::int64_t largest_page_number) const;

  const FairScheduler& scheduler_;
  const Estimator& estimator_;
  const DoorConfig config_;
};

}  // namespace fairlane
