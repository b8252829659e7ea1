// DispatchPolicy: every decision of fairlane's dispatch loop, on the injected Clock, with
// no I/O. The service's Dispatcher (src/service/dispatcher.cpp) drives it with Asio timers,
// the store's group commit and the provider client; the simulator (tools/sim) drives the
// same policy on virtual time. What it decides:
//
// The next step (next_step): pages held back for a backoff whose time has come return to
// the head of their lanes; during a pause nothing goes; while the provider is unreachable
// one call at a time finds out whether it is back; otherwise the next page in fair order
// asks the Budget and goes (Send, with its Lease), waits for the exact refill time or for
// a call to end, or fails when a whole minute's TPM cannot fit it. Order is kept: a page
// that must wait is not skipped. See dispatch_step.hpp.
//
// A call's end (on_outcome), in this order: the lease is settled with the usage, settled
// at its reservation for a 2xx whose answer could not be read (the provider counted its
// tokens; the reservation is the side that never overspends), or cancelled (no usage: the
// request stays spent). Then the buckets follow what the answer announced (CallOutcome::
// announced): their capacity and refill the provider's limits (the lower of those and the
// configured ones, Budget::follow_announced), their levels lowered to what it says is left;
// after the settle, so a refund cannot undo them. Then:
//   Answered         the estimator learns the usage and latency, in the order calls were
//                    sent (SendOrder); the lane is corrected by (used - estimate); Complete
//   RateLimited,     ALL dispatch pauses until Retry-After; when none came (or 0), for
//   Overloaded       default_pause x 2^k, k such pauses since the last answer, at most
//                    backoff_max (a pause still running covers the other refusals of its
//                    burst; a refusal of a call sent more than backoff_max after the last
//                    refusal and its pause starts again from k = 0); the page goes back to the
//                    head, no attempt spent; Requeue, or Fail ("gave up after N refusals...") past
//                    max_requeues returns
//   Unreachable,     an outage: ALL dispatch pauses for backoff_base x 2^k (k outage pauses
//   Rejected         in a row, at most backoff_max; a pause still running covers the other
//                    calls that come back so); while the outage lasts one call at a time goes
//                    out; the page goes back as for a 429 (max_requeues applies); any other
//                    outcome ends the outage
//   TransientError,  one attempt spent; below max_attempts the page is held back for a
//   Unreadable       full-jitter backoff, uniform in [0, min(backoff_max, backoff_base x
//                    2^(n-1))) for its n-th attempt (a seeded generator), then returns to the
//                    head; Retry with the wall-clock not_before; at max_attempts Fail
//                    ("gave up after N attempts: <reason>")
//   ClientError      Fail at once with the reason
// A call whose page the store could not read now (could_not_read) is held back as for a
// failed attempt, but spends a return, not an attempt. One whose page could not be prepared
// for what it holds (could_not_call) spends an attempt.
// A page's attempts carry over a restart (restore); its returns are counted in this
// process. A page whose job was cancelled while it was out (called, or held back) is
// forgotten when it comes back, not queued again.
//
// Thread safety: none, by design; the loop's thread owns the policy, its Budget, order and
// Estimator. Time comes only from the injected Clock, dates only from the WallClock.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "fairlane/core/budget.hpp"
#include "fairlane/core/call_outcome.hpp"
#include "fairlane/core/call_verdict.hpp"
#include "fairlane/core/clock.hpp"
#include "fairlane/core/dispatch_step.hpp"
#include "fairlane/core/estimator.hpp"
#include "fairlane/core/fair_scheduler.hpp"
#include "fairlane/core/ids.hpp"
#include "fairlane/core/in_flight_cap.hpp"
#include "fairlane/core/lease.hpp"
#include "fairlane/core/page_order.hpp"
#include "fairlane/core/send_order.hpp"
#include "fairlane/core/wall_clock.hpp"

namespace fairlane {

struct DispatchPolicyConfig {
  std::int64_t max_attempts = 5;    // failed attempts before a page fails for good
  std::int64_t max_requeues = 100;  // 429/503/unreachable returns before a page fails
  Clock::duration backoff_base = std::chrono::seconds(1);  // full jitter: [0, base * 2^n)
  Clock::duration backoff_max = std::chrono::seconds(60);
  Clock::duration default_pause = std::chrono::seconds(1);  // a 429/503 with no Retry-After
  // The longest a call may take: a previous process's calls out hold their places under
  // the in-flight cap at most this long after their dispatch.
  Clock::duration call_timeout = std::chrono::seconds(120);
  std::uint64_t seed = 0;  // for the backoff jitter
};

// A place under the in-flight cap held for a call a previous process left out at the
// provider, to be released after `left` (when the call could have ended at the latest).
struct InheritedCall {
  InFlightCap::Permit permit;
  Clock::duration left{};
};

class DispatchPolicy {
 public:
  // Everything passed by reference must outlive the policy.
  DispatchPolicy(const Clock& clock, const WallClock& wall_clock, Budget& budget, PageOrder& order,
                 Estimator& estimator, DispatchPolicyConfig config);

  DispatchPolicy(const DispatchPolicy&) = delete;
  DispatchPolicy& operator=(const DispatchPolicy&) = delete;

  // ---- pages coming in ----------------------------------------------------------------

  // A page of a job just enqueued joins the tail of its lane. Returns false, changing
  // nothing, for a page the policy knows already (queued, held or out).
  bool enqueue(const QueuedPage& page);
  // The pages of one job just uploaded (one user's) join the tail of their lane, in order,
  // and count as arrivals at the rounds they take there (Estimator::record_arrival, told
  // before they join), unless `arrived` is false (a cluster's job that a read of the store
  // counted already). Returns how many joined: pages the policy knows already are left out,
  // and count for nothing.
  std::int64_t enqueue_job(std::span<const QueuedPage> pages, bool arrived = true);

  // The door promised `job` it would be done by `finish_by`: the order may let it go first
  // when that is at risk (PromiseOrder).
  void promise(UserId user, JobId job, Clock::time_point finish_by) {
    order_.promise(user, job, finish_by);
  }

  // At start, a page the store holds queued, with the attempts it has spent: held back
  // until `not_before` while that is still ahead on the wall clock, otherwise in its lane.
  // False, and nothing done, for a page the policy knows already.
  bool restore(const QueuedPage& page, std::int64_t attempts, std::optional<WallTime> not_before);

  // Cancels a job: its queued pages leave their lanes, are forgotten and are returned.
  // Its pages still out (called, or held back) are forgotten as they come back.
  std::vector<QueuedPage> cancel_job(UserId user, JobId job);

  // At start: a place under the in-flight cap for each call a previous process left out
  // (dispatched at `dispatched_at`) until it could have ended: its dispatch plus twice the
  // longest recent call, at most call_timeout (the timeout itself with no recent call).
  // Calls that have ended by now get none; places run out when the cap is full.
  std::vector<InheritedCall> inherit_calls_out(const std::vector<WallTime>& dispatched_at,
                                               std::optional<Clock::duration> longest_recent_call);

  // Stopping: the pages held back for a backoff are let go here (the store keeps them
  // queued, with the backoff of a failed attempt, for the next start).
  void drop_held();

  // ---- the loop -----------------------------------------------------------------------

  // The loop's next move; see dispatch_step.hpp. A Send counts as a call out until one of
  // the four ends below reports it.
  [[nodiscard]] DispatchStep next_step();

  // Whether a call may go to the provider now: false during a pause, which may have begun
  // since its Send (a dispatch being committed meanwhile is then not_called()).
  [[nodiscard]] bool may_call() const;

  // The time since `page` joined its lane (enqueue(), or restore() of a page that had spent
  // no attempt), the first time it is asked for; std::nullopt after that.
  [[nodiscard]] std::optional<Clock::duration> first_call_wait(PageId page);

  // ---- a call's end: exactly one of these for each Send --------------------------------

  // The provider answered `outcome`: the lease is ended, then the verdict (see above).
  CallVerdict on_outcome(const QueuedPage& page, Lease& lease, const CallOutcome& outcome);

  // The call could not be made: its page could not be prepared (`reason`). The lease is
  // cancelled and an attempt spent, as for a transient error: Retry or Fail.
  CallVerdict could_not_call(const QueuedPage& page, Lease& lease, const std::string& reason);

  // The call could not be made: the store could not give its page's text now (`reason`: a
  // connection down, a lock), which is no fault of the page's. The lease is cancelled and no
  // attempt is spent; the page is held back for a full-jitter backoff as a failed attempt
  // is, doubling with each such return; its returns count towards max_requeues: Requeue, or
  // Fail ("gave up after N returns while <reason>"). The other pages go on meanwhile. As
  // with every return, the hold and the count live in this process: the store has the page
  // queued, and a restart sends it at once.
  CallVerdict could_not_read(const QueuedPage& page, Lease& lease, const std::string& reason);

  // The call was not made (a pause, or a stop, began while its dispatch was recorded): the
  // lease is cancelled, no attempt is spent, and the page goes back to the head of its lane
  // when `to_lane` (a stop keeps it out) and its job was not cancelled meanwhile.
  void not_called(const QueuedPage& page, Lease& lease, bool to_lane);

  // The page was no longer queued when its dispatch was recorded (its job was cancelled):
  // the lease is cancelled and the page forgotten.
  void withdrawn(const QueuedPage& page, Lease& lease);

  // ---- state --------------------------------------------------------------------------

  // Until when all dispatch is paused (a 429/503, the provider unreachable); std::nullopt
  // when it is not (a pause that has passed is cleared by the next step).
  [[nodiscard]] std::optional<Clock::time_point> paused_until() const { return paused_; }
  // What is left of that pause; zero when there is none.
  [[nodiscard]] Clock::duration paused_for() const {
    return paused_ ? std::max(*paused_ - clock_.now(), Clock::duration::zero())
                   : Clock::duration::zero();
  }
  // Outage pauses in a row (0 once the provider answers anything).
  [[nodiscard]] std::int64_t outage_pauses() const { return outage_pauses_; }
  // Calls sent and not yet ended.
  [[nodiscard]] std::int64_t calls_out() const {
    return static_cast<std::int64_t>(tickets_.size());
  }
  // Pages held back until their backoff ends.
  [[nodiscard]] std::size_t held() const { return held_.size(); }
  // For each job with pages held back, how long until the last of them returns to its lane
  // (for PromiseWatch). O(jobs with pages held).
  [[nodiscard]] std::unordered_map<JobId, Clock::duration> held_back() const;
  // How long until the last of `job`'s pages held back returns to its lane; std::nullopt
  // when none is held. O(1) expected.
  [[nodiscard]] std::optional<Clock::duration> held_back(JobId job) const;
  // Pages known (queued, held or out), and cancelled jobs remembered because some of their
  // pages are still out: bounded by the pages in the lanes and out.
  [[nodiscard]] std::size_t tracked_pages() const { return pages_.size(); }
  // Whether the page is known (queued, held or out).
  [[nodiscard]] bool knows(PageId page) const { return pages_.contains(page); }
  // Whether some page of `job` is known (queued, held or out) and the job not cancelled here.
  [[nodiscard]] bool tracks_job(JobId job) const {
    return job_pages_.contains(job) && !cancelled_jobs_.contains(job);
  }
  [[nodiscard]] std::size_t cancelled_jobs() const { return cancelled_jobs_.size(); }
  // The jobs tracks_job() holds for, in no particular order: O(jobs tracked).
  [[nodiscard]] std::vector<JobId> tracked_jobs() const;

 private:
  struct PageRecord {
    std::int64_t attempts = 0;
    std::int64_t requeues = 0;  // returns of any kind (max_requeues)
    std::int64_t unread = 0;    // returns because its text could not be read (their backoff)
    std::optional<Clock::time_point> queued_at;  // until its first call
  };

  // The page's record, made if it has none.
  PageRecord& track(const QueuedPage& page);
  // The page has ended or left for good: its record goes, and its job's once it has none.
  void forget(const QueuedPage& page);
  void hold(const QueuedPage& page, Clock::time_point until);
  // Held pages whose time has come go back to the head of their lanes.
  void release_held(Clock::time_point now);
  [[nodiscard]] Clock::time_point next_release() const;
  // A Send has ended: what it settled, when answered, goes to the estimator in send order.
  void end_call(const QueuedPage& page, std::optional<SendOrder::Settled> settled = std::nullopt);
  // The buckets follow what an answer announced of the provider's budgets.
  void follow(const Announced& announced);
  // A return, no attempt spent: back to the head of its lane, or held back for a backoff
  // doubling with such returns when its text could not be read (`unread`). `returns` names
  // what sent the page back, for its error if it returns too often.
  CallVerdict requeue(const QueuedPage& page, const std::string& returns, bool unread = false);
  CallVerdict retry_or_fail(const QueuedPage& page, const std::string& reason);
  // A full-jitter backoff for the n-th try: uniform in [0, min(max, base x 2^(n-1))).
  Clock::duration jittered_backoff(std::int64_t n);
  CallVerdict fail(const QueuedPage& page, std::string reason);
  void pause_for(Clock::duration d);
  // A 429/503's pause: its Retry-After, or without one default_pause x 2^k (k such pauses
  // since the last answer or quiet spell, at most backoff_max), unless a pause is running.
  void pause_for_refusal(std::optional<Clock::duration> retry_after, Clock::time_point sent_at);
  // Starts an outage pause, unless one is running; returns its length when it did.
  std::optional<Clock::duration> pause_for_outage();

  // Constant after construction.
  const Clock& clock_;
  const WallClock& wall_clock_;
  Budget& budget_;
  PageOrder& order_;
  Estimator& estimator_;
  const DispatchPolicyConfig config_;

  // Only touched on the owning thread.
  std::mt19937_64 rng_;
  std::unordered_map<PageId, PageRecord> pages_;
  std::unordered_map<JobId, std::int64_t> job_pages_;  // tracked pages by job
  std::unordered_set<JobId> cancelled_jobs_;           // with pages still out
  std::multimap<Clock::time_point, QueuedPage> held_;  // by release time, then hold order
  // The release times of held_'s pages by job: a job's last release without a scan of held_.
  std::unordered_map<JobId, std::multiset<Clock::time_point>> held_by_job_;
  std::optional<Clock::time_point> paused_;
  std::int64_t outage_pauses_ = 0;
  // Pauses of 429/503s without a Retry-After since an answer or a quiet spell; and when the
  // last refusal came or the pause it ran under ended, the later.
  std::int64_t refusal_pauses_ = 0;
  std::optional<Clock::time_point> refusal_quiet_from_;
  SendOrder sends_;  // the calls out, in the order they went
  // Each call out's place in sends_; their count is calls_out().
  std::unordered_map<PageId, std::uint64_t> tickets_;
};

}  // namespace fairlane
