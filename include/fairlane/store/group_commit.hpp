// GroupCommit: page transitions queued and committed together, one transaction per batch,
// so the dispatcher's many small state changes cost one commit every few milliseconds
// instead of one each. Whoever waits on a transition hears of it only after its batch has
// committed.
//
// The owner drives it: submit() queues a transition; flush() commits everything queued.
// due() says a flush should happen now (the batch is full, or the oldest transition has
// waited max_delay); deadline() says when the oldest one will be due, for a timer. A batch
// that fails to commit stays queued, in order, and its callbacks are not called until it
// commits; the next attempt is due only after a backoff (retry_delay, doubling up to
// max_retry_delay), so a broken disk is not hammered in a tight loop.
//
// Thread safety: none; it lives on the thread that owns the Store.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "fairlane/core/clock.hpp"
#include "fairlane/core/status.hpp"
#include "fairlane/store/page_transition.hpp"
#include "fairlane/store/store.hpp"

namespace fairlane {

struct GroupCommitOptions {
  std::size_t max_batch = 512;                                   // flush when this many wait
  Clock::duration max_delay = std::chrono::milliseconds(5);      // or the oldest is this old
  Clock::duration retry_delay = std::chrono::milliseconds(100);  // after a failed flush
  Clock::duration max_retry_delay = std::chrono::seconds(10);
};

class GroupCommit {
 public:
  // Called once its transition has committed, with what Store::apply answered for it: 0
  // when it no longer applied; for a dispatch, the call's number; else the pages changed.
  using Committed = std::function<void(std::int64_t outcome)>;

  // `store` and `clock` must outlive it.
  GroupCommit(Store& store, const Clock& clock, GroupCommitOptions options = {});

  GroupCommit(const GroupCommit&) = delete;
  GroupCommit& operator=(const GroupCommit&) = delete;

  // Queues `transition`; `committed` (may be empty) runs after its batch commits.
  void submit(PageTransition transition, Committed committed = {});

  [[nodiscard]] std::size_t pending() const { return transitions_.size(); }
  [[nodiscard]] bool due() const;
  // When the oldest queued transition is due; std::nullopt when none is queued.
  [[nodiscard]] std::optional<Clock::time_point> deadline() const;

  // Commits every queued transition in one transaction, then runs their callbacks in
  // order. On error nothing is committed, everything stays queued, and the Status says why.
  Status flush();

  // Drops every queued transition and its callback, uncommitted and untold (the owner is
  // shutting down and the store cannot take them). Returns how many were dropped.
  std::size_t abandon();

 private:
  // Constant after construction.
  Store& store_;
  const Clock& clock_;
  const GroupCommitOptions options_;

  // Only touched on the owning thread. transitions_[i] goes with callbacks_[i].
  std::vector<PageTransition> transitions_;
  std::vector<Committed> callbacks_;
  Clock::time_point oldest_;
  // After a failed flush: not due again before retry_at_; the next failure waits longer.
  std::optional<Clock::time_point> retry_at_;
  std::int64_t failures_ = 0;  // in a row
};

}  // namespace fairlane
