// GroupCommit: page transitions queued and committed together, one transaction per batch,
// so the dispatcher's many small state changes cost one commit every few milliseconds
// instead of one each. Whoever waits on a transition hears of it only after its batch has
// committed.
//
// The owner drives it: submit() queues a transition; flush() commits everything queued.
// due() says a flush should happen now (the batch is full, or the oldest transition has
// waited max_delay); deadline() says when the oldest one will be due, for a timer. A batch
// that fails to commit stays queued, in order, and is retried by the next flush; its
// callbacks are not called until it commits.
//
// Thread safety: none; it lives on the thread that owns the Store.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "fairlane/clock.hpp"
#include "fairlane/page_transition.hpp"
#include "fairlane/status.hpp"
#include "fairlane/store.hpp"

namespace fairlane {

struct GroupCommitOptions {
  std::size_t max_batch = 512;                               // flush at once when this many wait
  Clock::duration max_delay = std::chrono::milliseconds(5);  // or when the oldest is this old
};

class GroupCommit {
 public:
  // Called once its transition has committed, with the number of pages it changed
  // (0 when it no longer applied).
  using Committed = std::function<void(std::int64_t pages_changed)>;

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

 private:
  // Constant after construction.
  Store& store_;
  const Clock& clock_;
  const GroupCommitOptions options_;

  // Only touched on the owning thread. transitions_[i] goes with callbacks_[i].
  std::vector<PageTransition> transitions_;
  std::vector<Committed> callbacks_;
  Clock::time_point oldest_;
};

}  // namespace fairlane
