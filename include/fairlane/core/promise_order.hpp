// PromiseOrder: fair order that keeps the door's promises against the work it could not see.
// Pages go in deficit round robin (the FairScheduler's order); when a job's promise is at
// risk, it is given the turns of the lanes whose work arrived after that promise was made.
//
// The door promises each job a finish from the queue as it stands (sharing the provider
// fairly with every lane there) and the arrivals it expects (Estimator). What really
// arrives varies around that, and in fair order a newcomer takes an equal share at once, so
// a job overtaken by more than was expected ends late. Once every `review_every` (on the
// injected Clock, at the next peek) the earliest promises are projected again, now +
// Estimator::job's ETA; the earliest one whose projection passes its promise is AT RISK.
// While it is, whenever fair order would send a page of a job that joined its lane more
// than `seen_within` after that promise was made, the at-risk job's next page may go
// instead: the newcomer's lane is charged the turn it gave (FairScheduler::give_turn), so
// the round goes on, and the lanes the promise had counted on sharing with keep their turns.
// It takes just the share of those turns its promise needs: with S the seconds its last
// page needs sharing with everything queued (and the arrivals expected), H the same with the
// newer work's turns all its own (and none expected), and L the seconds left to its promise,
// the share is (S - L) / (S - H), or all of them when even H passes L. Each newer turn earns
// it that share of a turn, and it takes one whenever it has earned a whole one. A job whose
// promise holds, or with nobody newer to take turns from, simply shares.
//
// So the door's promise holds against what arrived after it, the only thing it could not
// count, and costs nothing to the users it did count: work that arrived together (a ramp's
// step, a shelf of books enqueued at once, the jobs restored at start) is shared in fair
// order as before. What fairness pays: a newcomer waits, while an earlier job is at risk,
// for that job's shortfall, never for a heavy user's shelf, because:
//   - only a user with one job queued is helped: a shelf of books would delay newcomers by
//     whole books (its promises are revised instead, by the service);
//   - a promise that has passed is not helped: going first cannot keep it any more, and it
//     would make the next promises late too (earliest deadline first under overload); the
//     service has revised that job's ETA and it shares.
//
// What the order does shows in a job's projection (project(), what the PromiseWatch revises
// by): a job whose promise the order holds, alone in its user's lane, is projected sharing
// while that keeps its promise; past it, as it will be served at risk: to its promise with
// the newer turns it needs, or later, H above, when even all of them cannot keep it. Every
// other job shares.
//
// A job leaves the promises when a review finds none of its pages queued (all answered or
// out; a page put back after a 429 comes back unpromised), when its promise has passed, or
// when it is cancelled.
//
// Cost: peek and take O(1) (O(log jobs queued) when a job joins or leaves); a review
// O(log promises) plus at most `reviewed` projections (Estimator::job), the passed promises
// it drops, and for the job it finds at risk the jobs that joined after its promise, at
// most kMostNewer of them (the newest); project() two projections and that walk.
//
// Thread safety: none, by design; the thread that owns the policy owns its order.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fairlane/core/clock.hpp"
#include "fairlane/core/estimator.hpp"
#include "fairlane/core/fair_scheduler.hpp"
#include "fairlane/core/ids.hpp"
#include "fairlane/core/page_order.hpp"

namespace fairlane {

struct PromiseOrderConfig {
  // How often the promises are projected again.
  Clock::duration review_every = std::chrono::seconds(1);
  // Work that joined its lane within this of a promise counts as seen by it: the door's
  // decisions on uploads that arrive in the same instant. Uploads on their way together are
  // promised again when their PromiseWindow closes, which makes each promise anew then, so
  // this only has to absorb the door deciding one by one. At 1 s, a book that arrived 0.3 s
  // after another was taken as seen by its promise and shared the provider with it: 5.6% of
  // scenario 10's books later than promise + 10%, 2.1% at 100 ms (docs/performance.md).
  Clock::duration seen_within = std::chrono::milliseconds(100);
  // The earliest promises projected at each review (the earliest at risk is the one helped).
  std::size_t reviewed = 64;
  // false: plain fair order, promises ignored (the simulator compares the two).
  bool keep_promises = true;
};

class PromiseOrder final : public PageOrder {
 public:
  // The scheduler, estimator and clock must outlive the order.
  PromiseOrder(FairScheduler& scheduler, const Estimator& estimator, const Clock& clock,
               PromiseOrderConfig config = {});

  [[nodiscard]] const QueuedPage* peek() override;
  QueuedPage take() override;
  void add(const QueuedPage& page) override;
  void put_back(const QueuedPage& page) override;
  void settle(const QueuedPage& page, std::int64_t used) override { scheduler_.settle(page, used); }
  void refund(const QueuedPage& page) override { scheduler_.refund(page); }
  std::vector<QueuedPage> remove_job(UserId user, JobId job) override;
  void promise(UserId user, JobId job, Clock::time_point finish_by) override;

  // Promises held (jobs with pages queued at the last review, promise not passed).
  [[nodiscard]] std::size_t promised() const { return promises_.size(); }
  // The job at risk that newer work gives its turns to, if any.
  [[nodiscard]] std::optional<JobId> at_risk() const { return at_risk_; }
  // The share of newer work's turns the job at risk takes (1 when none is at risk).
  [[nodiscard]] double help_share() const { return at_risk_ ? help_share_ : 1.0; }
  // Pages sent in a newer lane's turn for a promise at risk, ever.
  [[nodiscard]] std::int64_t out_of_turn() const { return out_of_turn_; }

  // The newer jobs a projection leaves out, at most: the newest that many. Beyond them the
  // rest count as ahead, which makes the projection later, never earlier, than the order's.
  static constexpr std::size_t kMostNewer = 256;
  // Where a queued job stands in this order (PageOrder::project). For a job whose promise is
  // held, alone in its user's lane, whose sharing projection passes that promise: the later
  // of the promise and the projection without the work expected to arrive
  // (Competition::held_off) and without the lanes' jobs that joined after the promise.
  [[nodiscard]] std::optional<JobEstimate> project(const Estimator& estimator, UserId user,
                                                   JobId job) const override;

 private:
  struct Promise {
    UserId user = 0;
    Clock::time_point made_at;
    Clock::time_point finish_by;
  };
  struct Joined {
    Clock::time_point at;  // min() for a job that came back as old work
    UserId user = 0;
  };

  void forget_promise(JobId job);
  // Projects the earliest promises again when a review is due.
  void review_if_due();
  // The at-risk job's page that goes in place of `fair` (fair order's next page), or
  // nullptr. Valid until the next change.
  [[nodiscard]] const QueuedPage* instead_of(const QueuedPage& fair) const;
  // The same whatever the share earned: `fair` is a newer job's turn the job at risk may take.
  [[nodiscard]] const QueuedPage* newer_turn(const QueuedPage& fair) const;
  // `turn` (newer_turn's page) when the job at risk has earned a whole turn, else nullptr.
  [[nodiscard]] const QueuedPage* taken_instead(const QueuedPage* turn) const {
    return turn != nullptr && help_credit_ + help_share_ >= 1.0 ? turn : nullptr;
  }
  // `job`'s estimate with every newer turn its own and no arrivals expected (H).
  [[nodiscard]] std::optional<JobEstimate> with_newer_turns(const Estimator& estimator, UserId user,
                                                            JobId job, const Promise& p,
                                                            Refunds refunds) const;
  [[nodiscard]] static double seconds_left(const Promise& p, Clock::time_point now) {
    return std::chrono::duration<double>(p.finish_by - now).count();
  }
  // The lanes' jobs that joined after promise `p` of `user`'s job: at most kMostNewer, the
  // newest, as one tail a lane.
  [[nodiscard]] std::vector<LaneTail> newer_work(UserId user, const Promise& p) const;
  // The share of the newer work's turns `job`, at risk with `sharing_s` seconds to go sharing,
  // needs to keep its promise `p` from `now`.
  [[nodiscard]] double help_needed(UserId user, JobId job, const Promise& p, double sharing_s,
                                   Clock::time_point now) const;
  // After a take: a job with nothing left queued is forgotten.
  void taken(const QueuedPage& page);
  // A job's first page joined its lane at `at` (unless the job is queued already).
  void join(const QueuedPage& page, Clock::time_point at);
  void leave(JobId job);
  // Whether `job` joined its lane after the promise `p` was made (it gives its turns).
  [[nodiscard]] bool newer(Clock::time_point joined, const Promise& p) const {
    return joined > p.made_at + config_.seen_within;
  }

  // Constant after construction.
  FairScheduler& scheduler_;
  const Estimator& estimator_;
  const Clock& clock_;
  const PromiseOrderConfig config_;

  // Only touched on the owning thread.
  std::unordered_map<JobId, Promise> promises_;
  std::set<std::pair<Clock::time_point, JobId>> by_promise_;  // every promise, by finish
  std::unordered_map<JobId, Joined> joined_;                  // queued jobs: when they came
  std::set<std::pair<Clock::time_point, JobId>> by_joined_;   // the same, by when
  std::optional<JobId> at_risk_;
  double help_share_ = 1.0;   // of the newer turns, the job at risk takes (its review's)
  double help_credit_ = 0.0;  // the turns it has earned and not taken
  std::optional<Clock::time_point> next_review_;
  std::int64_t out_of_turn_ = 0;
};

}  // namespace fairlane
