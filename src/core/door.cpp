#include "fairlane/core/door.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "fairlane/core/budget.hpp"

namespace fairlane {

Door::Door(const FairScheduler& scheduler, const Estimator& estimator, const DoorConfig& config)
    : scheduler_(scheduler), estimator_(estimator), config_(config) {}

DoorDecision Door::admit(UserId user, std::span<const std::int64_t> page_tokens) const {
  const auto largest = std::max_element(page_tokens.begin(), page_tokens.end());
  if (largest == page_tokens.end()) return decide(user, 0, 0, 0, 0);
  std::int64_t total = 0;
  for (const std::int64_t tokens : page_tokens) total += tokens;
  const auto pages = static_cast<std::int64_t>(page_tokens.size());
  return decide(user, pages, total / pages, *largest,
                static_cast<std::int64_t>(largest - page_tokens.begin()) + 1);
}

DoorDecision Door::estimate(UserId user, std::int64_t pages, std::int64_t tokens_per_page) const {
  return decide(user, std::max<std::int64_t>(pages, 0), tokens_per_page, tokens_per_page, 1);
}

DoorDecision Door::decide(UserId user, std::int64_t pages, std::int64_t tokens_per_page,
                          std::int64_t largest_page, std::int64_t largest_page_number) const {
  if (config_.tokens_per_minute > 0 && largest_page > config_.tokens_per_minute) {
    return DoorRequestTooLarge{largest_page_number, largest_page, config_.tokens_per_minute};
  }
  if (auto too_long_job = too_long(user, pages, tokens_per_page)) return *too_long_job;
  const std::int64_t queued = scheduler_.lane_length(user);
  // As a difference: `pages` may be any number an estimate is asked about.
  if (pages > config_.max_queued_pages_per_user - queued) {
    return DoorUserQueueFull{queued, pages, config_.max_queued_pages_per_user};
  }
  const JobEstimate estimate = estimator_.estimate_new(user, pages, tokens_per_page);
  const double wait = std::max(estimate.eta_seconds - estimate.own_seconds, 0.0);
  if (wait > config_.max_wait_s) {
    const auto over = std::chrono::duration<double>(wait - config_.max_wait_s);
    return DoorBusy{estimate.position, wait, config_.max_wait_s,
                    retry_after_seconds(std::chrono::duration_cast<Clock::duration>(over)),
                    estimate.eta_seconds};
  }
  return DoorAccepted{estimate};
}

std::optional<DoorJobTooLarge> Door::too_long(UserId user, std::int64_t pages,
                                              std::int64_t tokens_per_page) const {
  if (config_.max_job_s <= 0.0 || pages <= 0) return std::nullopt;
  const double alone = estimator_.alone_seconds(user, pages, tokens_per_page);
  if (alone <= config_.max_job_s) return std::nullopt;
  // The most pages that fit, by bisection: a job's time alone grows with its pages (the
  // sending at the steady rate, and the margin for the slowest of its last calls, which
  // hardly shrinks for fewer pages, so dividing the limit by a page's share of `alone`
  // named parts that were refused again). O(log pages) estimates, on this refusal only.
  std::int64_t fits = 0;  // alone_seconds(fits) <= max_job_s, or 0
  std::int64_t over = pages;
  while (over - fits > 1) {
    const std::int64_t mid = fits + (over - fits) / 2;
    (estimator_.alone_seconds(user, mid, tokens_per_page) <= config_.max_job_s ? fits : over) = mid;
  }
  const std::int64_t parts = fits > 0 ? (pages + fits - 1) / fits : 0;
  return DoorJobTooLarge{pages, alone, config_.max_job_s, fits, parts};
}

}  // namespace fairlane
