// Door: the decision at upload time, made before anything is stored. A job is refused at
// once, with a reason the caller can act on, when
//   - one of its pages needs more tokens than a whole minute's TPM (no wait can fit it),
//   - its user would have more than max_queued_pages_per_user pages queued, or
//   - its estimated wait (eta_seconds of its last page) exceeds max_wait,
// in that order; otherwise it is accepted with its position and ETA.
//
// Thread safety: none, by design; it reads the scheduler and estimator on their thread.
#pragma once

#include <cstdint>
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
};

struct DoorAccepted {
  JobEstimate estimate;
};

// 503: the job would wait longer than max_wait. Come back after retry_after_s.
struct DoorBusy {
  std::int64_t position = 0;
  double estimated_wait_s = 0.0;
  double max_wait_s = 0.0;
  std::int64_t retry_after_s = 1;
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

using DoorDecision = std::variant<DoorAccepted, DoorBusy, DoorUserQueueFull, DoorRequestTooLarge>;

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
  [[nodiscard]] DoorDecision decide(UserId user, std::int64_t pages, std::int64_t tokens_per_page,
                                    std::int64_t largest_page,
                                    std::int64_t largest_page_number) const;

  const FairScheduler& scheduler_;
  const Estimator& estimator_;
  const DoorConfig config_;
};

}  // namespace fairlane
