#include "fairlane/store/group_commit.hpp"
#include "fairlane/core/backoff.hpp"

#include <algorithm>
#include <utility>

namespace fairlane {

GroupCommit::GroupCommit(Store& store, const Clock& clock, GroupCommitOptions options)
    : store_(store), clock_(clock), options_(options) {}

void GroupCommit::submit(PageTransition transition, Committed committed) {
  if (transitions_.empty()) oldest_ = clock_.now();
  transitions_.push_back(std::move(transition));
  callbacks_.push_back(std::move(committed));
}

bool GroupCommit::due() const {
  if (transitions_.empty()) return false;
  if (retry_at_ && clock_.now() < *retry_at_) return false;
  return transitions_.size() >= options_.max_batch || clock_.now() >= *deadline();
}

std::optional<Clock::time_point> GroupCommit::deadline() const {
  if (transitions_.empty()) return std::nullopt;
  const Clock::time_point oldest_due = oldest_ + options_.max_delay;
  return retry_at_ ? std::max(oldest_due, *retry_at_) : oldest_due;
}

Status GroupCommit::flush() {
  if (transitions_.empty()) return {};
  auto changed = store_.apply(transitions_);
  if (!changed.ok()) {
    retry_at_ = clock_.now() + doubled(options_.retry_delay, failures_++, options_.max_retry_delay);
    return changed.status();
  }
  retry_at_.reset();
  failures_ = 0;
  // Take the batch out before running callbacks, which may submit more.
  std::vector<Committed> callbacks = std::exchange(callbacks_, {});
  transitions_.clear();
  for (std::size_t i = 0; i < callbacks.size(); ++i) {
    if (callbacks[i]) callbacks[i](changed.value()[i]);
  }
  return {};
}

std::size_t GroupCommit::abandon() {
  const std::size_t dropped = transitions_.size();
  transitions_.clear();
  // Callbacks are destroyed last: they may own coroutines that would submit more.
  auto callbacks = std::exchange(callbacks_, {});
  retry_at_.reset();
  failures_ = 0;
  callbacks.clear();
  return dropped;
}

}  // namespace fairlane
