#include "fairlane/store/group_commit.hpp"
#include "fairlane/core/backoff.hpp"

#include <algorithm>
#include <cassert>
#include <iterator>
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
  if (transitions_.empty() || flushing_) return false;
  if (retry_at_ && clock_.now() < *retry_at_) return false;
  return transitions_.size() >= options_.max_batch || clock_.now() >= *deadline();
}

std::optional<Clock::time_point> GroupCommit::deadline() const {
  if (transitions_.empty() || flushing_) return std::nullopt;
  const Clock::time_point oldest_due = oldest_ + options_.max_delay;
  return retry_at_ ? std::max(oldest_due, *retry_at_) : oldest_due;
}

Status GroupCommit::flush() {
  if (transitions_.empty()) return {};
  std::vector<PageTransition> batch = begin_flush();
  auto changed = store_.apply(batch);
  return end_flush(std::move(batch), std::move(changed));
}

std::vector<PageTransition> GroupCommit::begin_flush() {
  assert(!flushing_ && "one batch out at a time");
  if (transitions_.empty()) return {};
  flushing_ = true;
  out_oldest_ = oldest_;
  out_callbacks_ = std::exchange(callbacks_, {});
  return std::exchange(transitions_, {});
}

Status GroupCommit::end_flush(std::vector<PageTransition> batch,
                              Result<std::vector<std::int64_t>> changed) {
  assert(flushing_ && "end_flush() after begin_flush()");
  flushing_ = false;
  std::vector<Committed> callbacks = std::exchange(out_callbacks_, {});
  if (!changed.ok()) {
    retry_at_ = clock_.now() + doubled(options_.retry_delay, failures_++, options_.max_retry_delay);
    // Back in front of what was queued meanwhile, in order; its oldest is the oldest now.
    if (!transitions_.empty()) {
      batch.insert(batch.end(), std::make_move_iterator(transitions_.begin()),
                   std::make_move_iterator(transitions_.end()));
      callbacks.insert(callbacks.end(), std::make_move_iterator(callbacks_.begin()),
                       std::make_move_iterator(callbacks_.end()));
    }
    oldest_ = out_oldest_;
    transitions_ = std::move(batch);
    callbacks_ = std::move(callbacks);
    return changed.status();
  }
  retry_at_.reset();
  failures_ = 0;
  // The batch is out of the queue before the callbacks run, which may submit more.
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
