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
  if (auto too_long_job = too_long(pages, tokens_per_page)) return *too_long_job;
  const std::int64_t queued = scheduler_.lane_length(user);
  if (queued + pages > config_.max_queued_pages_per_user) {
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

std::optional<DoorJobTooLarge> Door::too_long(std::int64_t pages,
                                              std::int64_t tokens_per_page) const {
  if (config_.max_job_s <= 0.0 || pages <= 0) return std::nullopt;
  const double alone = estimator_.alone_seconds(pages, tokens_per_page);
  if (alone <= config_.max_job_s) return std::nullopt;
  // Alone, a job takes a call's latency plus the same time for every page.
  const double latency = estimator_.avg_latency_s();
  const double per_page = (alone - latency) / static_cast<double>(pages);
  const auto fit = per_page > 0.0 ? std::floor((config_.max_job_s - latency) / per_page) : 0.0;
  const auto max_pages = static_cast<std::int64_t>(std::max(fit, 0.0));
  const std::int64_t parts = max_pages > 0 ? (pages + max_pages - 1) / max_pages : 0;
  return DoorJobTooLarge{pages, alone, config_.max_job_s, max_pages, parts};
}

}  // namespace fairlane
