#include "fairlane/core/promise_watch.hpp"

#include <algorithm>

#include "fairlane/core/estimator.hpp"
#include "fairlane/core/page_order.hpp"

namespace fairlane {
namespace {

using Seconds = std::chrono::duration<double>;

WallTime::duration wall_duration(double seconds) {
  return std::chrono::duration_cast<WallTime::duration>(Seconds(seconds));
}

constexpr WallTime::duration kEverySecond = std::chrono::seconds(1);
constexpr WallTime::duration kNear = std::chrono::seconds(10);

}  // namespace

void PromiseWatch::watch(UserId user, JobId job, WallTime created_at, WallTime promised_at,
                         std::optional<WallTime> announced_at, const Estimator& estimator,
                         WallTime now) {
  Entry& entry = watched_[job];
  entry.promise = WatchedPromise{user,         created_at,     promised_at,
                                 announced_at, estimator.mu(), estimator.avg_tokens_per_page()};
  entry.last_projection = announced_at.value_or(promised_at);
  schedule(job, entry, now, now);
}

void PromiseWatch::schedule(JobId job, Entry& entry, WallTime now, WallTime projected) {
  const WallTime told = entry.promise.announced_at.value_or(entry.promise.promised_at);
  const WallTime::duration left = std::min(told, projected) - now;
  entry.next_look = now + (left < kNear ? kEverySecond : left / 10);
  due_.push(Due{entry.next_look, job});
}

double PromiseWatch::slack_s(double promised_s) {
  return std::max(2.0, 0.1 * promised_s);
}

std::optional<double> seconds_to_finish(std::optional<double> queued_s, double paused_s,
                                        std::optional<double> held_s, double latency_s) {
  paused_s = std::max(paused_s, 0.0);
  std::optional<double> finish;
  if (queued_s) finish = *queued_s + paused_s;
  if (held_s) {
    const double after = std::max(*held_s, paused_s) + latency_s;
    finish = std::max(finish.value_or(after), after);
  }
  return finish;
}

std::vector<Revision> PromiseWatch::check(const Estimator& estimator, const PageOrder& order,
                                          WallTime now, Clock::duration paused_for,
                                          const Ended& ended, const HeldBack& held) {
  const double paused_s = std::max(Seconds(paused_for).count(), 0.0);
  std::vector<Revision> revised;
  while (!due_.empty() && due_.top().at <= now) {
    const Due due = due_.top();
    due_.pop();
    const auto it = watched_.find(due.job);
    if (it == watched_.end() || it->second.next_look != due.at) continue;  // stale
    Entry& entry = it->second;
    WallTime projected;
    const auto estimate = order.project(estimator, entry.promise.user, due.job);
    if (estimate) {
      projected = now + wall_duration(
                            *seconds_to_finish(estimate->eta_seconds, paused_s, std::nullopt, 0.0));
      entry.last_projection = projected;
    } else if (ended(due.job, entry.promise)) {
      watched_.erase(it);
      continue;
    } else {
      // All its pages are out: they answer by the last projection made while some were
      // queued. Once that has passed they are late, and a call's latency more is the guess.
      projected = entry.last_projection >= now ? entry.last_projection
                                               : now + wall_duration(estimator.avg_latency_s());
    }
    // A page held back for a backoff is in no lane: it goes at its release (or the pause's
    // end) and answers a call later.
    bool held_back = false;
    if (const auto h = held.find(due.job); h != held.end()) {
      const WallTime after =
          now + wall_duration(*seconds_to_finish(std::nullopt, paused_s, Seconds(h->second).count(),
                                                 estimator.avg_latency_s()));
      if (after > projected) {
        projected = after;
        held_back = true;
      }
    }
    const WallTime told = entry.promise.announced_at.value_or(entry.promise.promised_at);
    const double promised_s = Seconds(entry.promise.promised_at - entry.promise.created_at).count();
    if (projected > told + wall_duration(slack_s(promised_s))) {
      const double mu = mu_now(entry.promise, estimator);
      revised.push_back(Revision{due.job, projected,
                                 reason(entry.promise, mu, paused_for, held_back), entry.promise.mu,
                                 mu});
    }
    schedule(due.job, entry, now, projected);
  }
  return revised;
}

std::optional<WallTime> PromiseWatch::promised_at(JobId job) const {
  const auto it = watched_.find(job);
  if (it == watched_.end()) return std::nullopt;
  return it->second.promise.promised_at;
}

void PromiseWatch::announced(JobId job, WallTime finish) {
  const auto it = watched_.find(job);
  if (it == watched_.end()) return;
  it->second.promise.announced_at = finish;
  // Its next look was set at the check, from the nearer of the finish it was told before
  // and this one: no later than from this one.
}

double PromiseWatch::mu_now(const WatchedPromise& promise, const Estimator& estimator) {
  return promise.tokens_per_page > 0.0 ? estimator.mu_at(promise.tokens_per_page) : estimator.mu();
}

RevisionReason PromiseWatch::reason(const WatchedPromise& promise, double mu_now,
                                    Clock::duration paused_for, bool held_back) {
  if (paused_for > Clock::duration::zero()) return RevisionReason::dispatch_paused;
  if (held_back) return RevisionReason::page_retrying;
  if (promise.mu > 0 && mu_now < 0.9 * promise.mu) return RevisionReason::provider_slower;
  return RevisionReason::more_work_ahead;
}

const char* to_string(RevisionReason reason) {
  switch (reason) {
    case RevisionReason::dispatch_paused:
      return "dispatch_paused";
    case RevisionReason::page_retrying:
      return "page_retrying";
    case RevisionReason::provider_slower:
      return "provider_slower";
    case RevisionReason::more_work_ahead:
      return "more_work_ahead";
  }
  return "more_work_ahead";
}

}  // namespace fairlane
