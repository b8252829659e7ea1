// PromiseWatch: the promises the door made, kept honest (DESIGN.md section 5, "Revised ETAs").
//
// Every watched job is projected again now and then: now + its ETA now, as the dispatch's
// order will serve it (PageOrder::project: the expected finish, the refunds of the calls out
// counted as they come back; where the PromiseOrder holds the job's promise, without the work
// that gives it its turns) + what is left of a pause of all dispatch. When that passes what
// was promised (or last announced) by more than the slack, max(2 s, 10% of the promised
// duration), the job is revised: the later finish, and why. Reasons, in order: dispatch is
// paused (the provider's Retry-After, or the provider unreachable); a page of the job is held
// back for a backoff after a failed call, and ends a call after its release; the provider is slower
// than when the promise was made (its rate for pages of the size they had then down by a
// tenth: lower limits, longer calls); otherwise more work arrived ahead of the job than the
// door expected, or pages use more tokens than they did (work too: the provider allows as
// many tokens).
//
// A job is looked at again every second while what it was told, or its projected finish, is
// less than 10 s away, and otherwise after a tenth of the time left until the nearer of the
// two: a lateness that grows by the slack (at least a tenth of the promise) is seen before
// the promise passes, a job that ends is seen to within a tenth of its time left, and a
// service with a hundred thousand jobs promised for hours does not project each of them
// every second. A job is first looked at a second after it is watched.
//
// A job with no page queued may have ended: the caller says whether it has (the service
// reads its store, the simulator knows), and an ended job is no longer watched. Until it
// has, its last pages are out, and they answer by the last projection made while some were
// queued (what it was told, if none was): a call sent a second ago does not take a whole
// latency from now. Past that projection they are late, and the guess is a latency from now.
//
// The service's Promises and the simulator drive the same watch, each with the Estimator it
// has at the time (the service builds a fresh one at a restart, a takeover, a follower's
// view read again). Thread safety: none, by design; it lives with that Estimator.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <queue>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fairlane/core/clock.hpp"
#include "fairlane/core/ids.hpp"

namespace fairlane {

class Estimator;
class PageOrder;

enum class RevisionReason : std::uint8_t {
  dispatch_paused,
  page_retrying,
  provider_slower,
  more_work_ahead
};

// A promise being watched.
struct WatchedPromise {
  UserId user = 0;
  WallTime created_at;
  WallTime promised_at;                  // what the door said
  std::optional<WallTime> announced_at;  // the last revision
  double mu = 0.0;                       // the estimator's rate when the promise was made
  double tokens_per_page = 0.0;          // and the pages' average usage it was for
};

// A job whose projected finish passed what it was told.
struct Revision {
  JobId job = 0;
  WallTime finish;  // now + the ETA now (+ what is left of a pause)
  RevisionReason reason = RevisionReason::more_work_ahead;
  double mu_then = 0.0;  // the rate when the promise was made
  double mu_now = 0.0;   // the rate now, for pages of the size they had then
};

// When a job ends, in seconds from now: `queued_s` for its queued pages as the order serves
// them (std::nullopt when none is queued) once what is left of a pause of all dispatch
// (`paused_s`) has passed, and no sooner than a call (`latency_s`) after the last of its
// pages held back for a backoff returns (`held_s`), or the pause ends if later. std::nullopt
// when it has neither queued nor held pages. The one rule for the job object's eta_seconds
// and the PromiseWatch's projections.
[[nodiscard]] std::optional<double> seconds_to_finish(std::optional<double> queued_s,
                                                      double paused_s, std::optional<double> held_s,
                                                      double latency_s);

class PromiseWatch {
 public:
  // Whether a job with no page queued has ended; an ended job is no longer watched.
  using Ended = std::function<bool(JobId, const WatchedPromise&)>;
  // For each job with pages held back for a backoff (out of the lanes until their next
  // attempt: DispatchPolicy::held_back), how long until the last of them returns.
  using HeldBack = std::unordered_map<JobId, Clock::duration>;

  // Watches `job`, promised at `promised_at` (announced later at `announced_at`, if a
  // revision was made before a restart), from `now` on, the provider's pace being what
  // `estimator` measures now.
  void watch(UserId user, JobId job, WallTime created_at, WallTime promised_at,
             std::optional<WallTime> announced_at, const Estimator& estimator, WallTime now);
  // Projects the jobs due to be looked at again by `now` as `order` serves them, with
  // `estimator` (over the order's scheduler). `paused_for`: what is left of a pause of all
  // dispatch. A job with pages `held` back ends no sooner than a call after the last of them
  // returns (or the pause ends, if later). Returns the revisions, which count as told once
  // announced().
  [[nodiscard]] std::vector<Revision> check(const Estimator& estimator, const PageOrder& order,
                                            WallTime now, Clock::duration paused_for,
                                            const Ended& ended, const HeldBack& held);
  // A revision was told (stored, pushed): later ones are measured from it.
  void announced(JobId job, WallTime finish);

  // How far past what a job was told its projection may go, in seconds, for a promise of
  // `promised_s` from the job's creation: max(2 s, 10% of it).
  [[nodiscard]] static double slack_s(double promised_s);

  [[nodiscard]] std::size_t watched() const { return watched_.size(); }
  // What the door promised a watched job; std::nullopt for a job not watched.
  [[nodiscard]] std::optional<WallTime> promised_at(JobId job) const;

 private:
  struct Entry {
    WatchedPromise promise;
    WallTime next_look;
    WallTime last_projection;  // the last made while a page was queued
  };
  struct Due {
    WallTime at;
    JobId job;
    bool operator>(const Due& other) const {
      return at != other.at ? at > other.at : job > other.job;
    }
  };

  [[nodiscard]] static RevisionReason reason(const WatchedPromise& promise, double mu_now,
                                             Clock::duration paused_for, bool held_back);
  // The provider's rate now for pages of the size `promise` was made for.
  [[nodiscard]] static double mu_now(const WatchedPromise& promise, const Estimator& estimator);
  // When to look at `entry` again, from `now`, projected to finish at `projected`.
  void schedule(JobId job, Entry& entry, WallTime now, WallTime projected);

  std::unordered_map<JobId, Entry> watched_;
  // By when each job is due; an element whose time is not its entry's next_look is stale.
  std::priority_queue<Due, std::vector<Due>, std::greater<>> due_;
};

[[nodiscard]] const char* to_string(RevisionReason reason);

}  // namespace fairlane
