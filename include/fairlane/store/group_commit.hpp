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
// A transition the store refuses for what it holds stalls no other. A batch of several that
// fails with invalid_argument or internal (what a transition's own content can cause; a
// full disk, a lock or a lost connection cannot) is taken apart: its transitions are
// committed one at a time, each in its order; a transition alone in its batch (a quiet
// service) is taken as alone at its second failure in a row, so that one passing fault does
// not fail its page. One refused alone is replaced in place, with no backoff, by the failure
// of its page (PageTransition::failed, the store's reason in its error), so the page ends
// failed with a reason instead of every page behind it waiting for good. A replacement
// refused too, or a refused cancellation, is dropped, its page left as the store had it (a
// page in flight is taken up again at the next start). Either way its callback hears 0, as
// for a transition that no longer applied (a dispatch refused makes no call), and the
// Status says what became of it.
//
// An owner that commits elsewhere (on a thread of its own, with a connection of its own,
// so that its event loop goes on meanwhile) flushes in two halves: begin_flush() takes the
// queued batch, end_flush() gives it back with what the store answered. In between one
// batch is out: due() is false, submit() queues for the next one, and a batch that failed
// goes back in front of what was queued since, in order.
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
  // When the oldest queued transition is due; std::nullopt when none is queued, or while a
  // batch is out (ask again after end_flush()).
  [[nodiscard]] std::optional<Clock::time_point> deadline() const;

  // Commits every queued transition in one transaction, then runs their callbacks in
  // order. On error nothing is committed, everything stays queued, and the Status says why.
  // Not while a batch is out (flushing()).
  Status flush();
  // The first half of a flush elsewhere: the queued batch, to commit with Store::apply.
  // Not while a batch is out; empty when nothing is queued.
  [[nodiscard]] std::vector<PageTransition> begin_flush();
  // The second half: `batch` (what begin_flush() gave) and what Store::apply answered for
  // it. Then as flush(): the callbacks run in order, or the batch is queued again, first.
  Status end_flush(std::vector<PageTransition> batch, Result<std::vector<std::int64_t>> changed);
  // A batch is out, between begin_flush() and end_flush().
  [[nodiscard]] bool flushing() const { return flushing_; }

  // Drops every queued transition and its callback, uncommitted and untold (the owner is
  // shutting down and the store cannot take them). Returns how many were dropped.
  std::size_t abandon();

  // Transitions the store refused alone, ever: replaced by their page's failure, or dropped.
  [[nodiscard]] std::int64_t refused() const { return refused_; }

  // What a transition's own content can make the store refuse, every time it is tried
  // (invalid_argument, internal): a batch that fails so is taken apart.
  [[nodiscard]] static bool refused_for_content(StatusCode code);

 private:
  // Constant after construction.
  Store& store_;
  const Clock& clock_;
  const GroupCommitOptions options_;

  // Only touched on the owning thread. transitions_[i] goes with callbacks_[i].
  std::vector<PageTransition> transitions_;
  std::vector<Committed> callbacks_;
  // The callbacks of the batch that is out (flushing_), in its order.
  std::vector<Committed> out_callbacks_;
  bool flushing_ = false;
  Clock::time_point out_oldest_;
  Clock::time_point oldest_;
  // After a failed flush: not due again before retry_at_; the next failure waits longer.
  std::optional<Clock::time_point> retry_at_;
  std::int64_t failures_ = 0;  // in a row
  // Transitions still to commit one at a time, from a batch the store refused.
  std::size_t one_at_a_time_ = 0;
  bool front_replaced_ = false;  // the first queued transition replaces a refused one
  std::int64_t refused_ = 0;

  // The refused transition at the front of the queue is replaced by its page's failure, or
  // dropped; returns what to report.
  Status refuse_front(const Status& why);
};

}  // namespace fairlane
