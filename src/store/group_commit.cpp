#include "fairlane/store/group_commit.hpp"
#include "fairlane/core/backoff.hpp"
#include "fairlane/core/text.hpp"

#include <fmt/format.h>

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
  if (one_at_a_time_ > 0) {
    // Taking a refused batch apart: its first transition alone.
    std::vector<PageTransition> first;
    first.push_back(std::move(transitions_.front()));
    transitions_.erase(transitions_.begin());
    out_callbacks_.clear();
    out_callbacks_.push_back(std::move(callbacks_.front()));
    callbacks_.erase(callbacks_.begin());
    return first;
  }
  out_callbacks_ = std::exchange(callbacks_, {});
  return std::exchange(transitions_, {});
}

bool GroupCommit::refused_for_content(StatusCode code) {
  return code == StatusCode::invalid_argument || code == StatusCode::internal;
}

Status GroupCommit::refuse_front(const Status& why) {
  ++refused_;
  PageTransition& refused = transitions_.front();
  const bool replace = !front_replaced_ && refused.kind != PageTransition::Kind::job_cancelled;
  if (replace) {
    // At most 300 bytes of the reason, as storable text (a cut character becomes U+FFFD).
    const std::string reason = storable_text(std::string_view(why.message()).substr(0, 300));
    refused = PageTransition::failed(
        refused.page_id,
        fmt::format("the store refused this page's change ({}: {})", to_string(why.code()), reason),
        refused.call);
    front_replaced_ = true;
    retry_at_.reset();  // nothing to wait for: the failure goes at once
    return Status{why.code(), fmt::format("{}; page {} fails instead", why.message(),
                                          transitions_.front().page_id)};
  }
  transitions_.erase(transitions_.begin());
  Committed told = std::move(callbacks_.front());
  callbacks_.erase(callbacks_.begin());
  front_replaced_ = false;
  --one_at_a_time_;
  retry_at_.reset();
  if (told) told(0);
  return Status{why.code(), fmt::format("{}; that change is dropped", why.message())};
}

Status GroupCommit::end_flush(std::vector<PageTransition> batch,
                              Result<std::vector<std::int64_t>> changed) {
  assert(flushing_ && "end_flush() after begin_flush()");
  flushing_ = false;
  std::vector<Committed> callbacks = std::exchange(out_callbacks_, {});
  if (!changed.ok()) {
    const bool content = refused_for_content(changed.status().code());
    // A transition alone in its batch (a quiet service) that fails again, now for what it
    // holds, is refused as one taken apart would be: at its second failure in a row, so a
    // passing fault does not fail its page, and no other has to join it first.
    const bool lone_again = one_at_a_time_ == 0 && batch.size() == 1 && failures_ > 0;
    const bool alone = one_at_a_time_ > 0 || lone_again;
    if (one_at_a_time_ == 0 && content && (batch.size() > 1 || lone_again)) {
      one_at_a_time_ = batch.size();
    }
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
    if (alone && content) {
      return refuse_front(changed.status());
    }
    return changed.status();
  }
  retry_at_.reset();
  failures_ = 0;
  // A refused change's replacement: what was asked did not apply.
  const bool replaced = one_at_a_time_ > 0 && front_replaced_;
  if (one_at_a_time_ > 0) {
    one_at_a_time_ -= std::min(one_at_a_time_, batch.size());
    front_replaced_ = false;
  }
  // The batch is out of the queue before the callbacks run, which may submit more.
  for (std::size_t i = 0; i < callbacks.size(); ++i) {
    if (callbacks[i]) callbacks[i](replaced ? 0 : changed.value()[i]);
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
  one_at_a_time_ = 0;
  front_replaced_ = false;
  callbacks.clear();
  return dropped;
}

}  // namespace fairlane
