#include "fairlane/core/dispatch_policy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <type_traits>
#include <utility>

#include "fairlane/core/backoff.hpp"

namespace fairlane {
namespace {

// Unreachable, or refusing fairlane itself: not the page's fault but the provider's (or the
// operator's) outage, which every page would meet. What it is, in words; nullopt for any
// other end.
std::optional<std::string> outage_of(const CallEnd& end) {
  if (const auto* unreachable = std::get_if<call::Unreachable>(&end)) {
    return fmt::format("unreachable ({})", unreachable->reason);
  }
  if (const auto* rejected = std::get_if<call::Rejected>(&end)) {
    return fmt::format("refusing fairlane ({})", rejected->reason);
  }
  return std::nullopt;
}

}  // namespace

DispatchPolicy::DispatchPolicy(const Clock& clock, const WallClock& wall_clock, Budget& budget,
                               PageOrder& order, Estimator& estimator, DispatchPolicyConfig config)
    : clock_(clock),
      wall_clock_(wall_clock),
      budget_(budget),
      order_(order),
      estimator_(estimator),
      config_(config),
      rng_(config.seed) {}

// ---- pages coming in -------------------------------------------------------------------

bool DispatchPolicy::enqueue(const QueuedPage& page) {
  if (pages_.contains(page.page_id)) return false;
  track(page).queued_at = clock_.now();
  order_.add(page);
  return true;
}

std::int64_t DispatchPolicy::enqueue_job(std::span<const QueuedPage> pages, bool arrived) {
  std::int64_t joined = 0;
  std::int64_t reserved = 0;
  for (const QueuedPage& page : pages) {
    if (pages_.contains(page.page_id)) continue;
    ++joined;
    reserved += page.cost;
  }
  // Before they join: they arrive behind what their lane holds now, not behind themselves
  // (a job heard of late, which goes before its user's later jobs, is counted so too).
  if (arrived && joined > 0) estimator_.record_arrival(pages.front().user_id, joined, reserved);
  for (const QueuedPage& page : pages) (void)enqueue(page);
  return joined;
}

bool DispatchPolicy::restore(const QueuedPage& page, std::int64_t attempts,
                             std::optional<WallTime> not_before) {
  if (pages_.contains(page.page_id)) return false;
  PageRecord& record = track(page);
  record.attempts = attempts;
  const Clock::time_point now = clock_.now();
  if (attempts == 0) record.queued_at = now;
  const WallTime wall_now = wall_clock_.now();
  if (not_before && *not_before > wall_now) {
    hold(page, now + std::chrono::duration_cast<Clock::duration>(*not_before - wall_now));
  } else {
    order_.add(page);
  }
  return true;
}

std::vector<QueuedPage> DispatchPolicy::cancel_job(UserId user, JobId job) {
  std::vector<QueuedPage> removed = order_.remove_job(user, job);
  for (const QueuedPage& page : removed) forget(page);
  // Pages still out (called, or held back) are forgotten when they come back.
  if (job_pages_.contains(job)) cancelled_jobs_.insert(job);
  return removed;
}

std::vector<InheritedCall> DispatchPolicy::inherit_calls_out(
    const std::vector<WallTime>& dispatched_at,
    std::optional<Clock::duration> longest_recent_call) {
  // How long a call of the dead process may still run at the provider: about as long as
  // calls took lately; twice the longest recent one covers a provider that was slowing
  // down, and the call timeout bounds it (no history: the timeout itself).
  Clock::duration horizon = config_.call_timeout;
  if (longest_recent_call) horizon = std::min(horizon, 2 * *longest_recent_call);
  const WallTime wall_now = wall_clock_.now();
  const Clock::time_point now = clock_.now();
  std::vector<InheritedCall> held;
  for (const WallTime dispatched : dispatched_at) {
    const auto age = std::chrono::duration_cast<Clock::duration>(wall_now - dispatched);
    const Clock::duration left = horizon - age;
    if (left <= Clock::duration::zero()) continue;
    // Sent when the dead process dispatched it, as this clock reads.
    auto permit = budget_.in_flight().try_acquire(now - age);
    if (!permit) break;  // more calls out than the cap: the cap is full already
    held.push_back(InheritedCall{std::move(*permit), left});
  }
  return held;
}

void DispatchPolicy::drop_held() {
  held_.clear();
  held_by_job_.clear();
}

// ---- the loop --------------------------------------------------------------------------

DispatchStep DispatchPolicy::next_step() {
  const Clock::time_point now = clock_.now();
  release_held(now);
  const Clock::time_point release = next_release();
  if (paused_ && *paused_ > now) return step::SleepUntil{std::min(*paused_, release)};
  paused_.reset();
  if (outage_pauses_ > 0 && !tickets_.empty()) {
    // The provider was unreachable: one call at a time finds out whether it is back.
    return step::WaitForCall{release};
  }
  const QueuedPage* next = order_.peek();
  if (next == nullptr) return step::Idle{release};
  Admission admission = budget_.admit(next->cost);
  if (const auto* wait = std::get_if<Wait>(&admission)) {
    // A bucket: until its exact refill time. The in-flight cap: until a call ends.
    if (wait->wait > Clock::duration::zero()) {
      return step::SleepUntil{std::min(now + wait->wait, release)};
    }
    return step::WaitForCall{release};
  }
  const QueuedPage page = order_.take();
  if (const auto* too_large = std::get_if<TooLarge>(&admission)) {
    order_.refund(page);
    forget(page);
    return step::FailPage{
        page, fmt::format("the page needs {} tokens, more than the provider's {} a minute",
                          too_large->tokens, too_large->capacity)};
  }
  // A page has one call out at a time; were one still ticketed, it is over without an answer.
  if (const auto out = tickets_.find(page.page_id); out != tickets_.end()) {
    sends_.ended(out->second, std::nullopt, [](const SendOrder::Settled&) {});
  }
  tickets_[page.page_id] = sends_.sent();
  return step::Send{page, std::move(std::get<Lease>(admission))};
}

bool DispatchPolicy::may_call() const {
  return !paused_ || *paused_ <= clock_.now();
}

std::optional<Clock::duration> DispatchPolicy::first_call_wait(PageId page) {
  const auto record = pages_.find(page);
  if (record == pages_.end() || !record->second.queued_at) return std::nullopt;
  const Clock::duration waited = clock_.now() - *record->second.queued_at;
  record->second.queued_at.reset();
  return waited;
}

// ---- a call's end ----------------------------------------------------------------------

namespace {

// What an answer counts for the lane, the estimator and the bucket: the provider's usage, up
// to four times the page's reservation. A count past that is a provider's (or a proxy's)
// mistake, not a page: summed near INT64_MAX it overflowed, and a trillion tokens made every
// ETA absurd and its lane owe for ever.
std::int64_t most_counted(std::int64_t reserved) {
  return 4 * std::max<std::int64_t>(reserved, 1);
}

std::int64_t counted_usage(const call::Answered& answered, std::int64_t reserved) {
  const std::int64_t most = most_counted(reserved);
  const std::int64_t input = std::clamp<std::int64_t>(answered.input_tokens, 0, most);
  const std::int64_t output = std::clamp<std::int64_t>(answered.output_tokens, 0, most);
  return std::min(input + output, most);
}

}  // namespace

void DispatchPolicy::follow(const Announced& announced) {
  budget_.follow_announced(announced.requests_limit, announced.tokens_limit);
  if (announced.requests_remaining) budget_.requests().sync_down(*announced.requests_remaining);
  if (announced.tokens_remaining) budget_.tokens().sync_down(*announced.tokens_remaining);
}

CallVerdict DispatchPolicy::on_outcome(const QueuedPage& page, Lease& lease,
                                       const CallOutcome& outcome) {
  const CallEnd& end = outcome.end;
  const auto* answered = std::get_if<call::Answered>(&end);
  std::optional<SendOrder::Settled> settled;
  if (answered != nullptr) {
    settled = SendOrder::Settled{.used = counted_usage(*answered, page.cost),
                                 .reserved = page.cost,
                                 .latency = outcome.latency};
  }
  end_call(page, settled);
  if (answered != nullptr) {
    lease.settle(settled->used);
  } else if (std::holds_alternative<call::Unreadable>(end)) {
    // The provider ran the call and counted its tokens, but its answer cannot be read:
    // count what was reserved, the side that never overspends.
    lease.settle(lease.reserved_tokens());
  } else if (const auto* declined = std::get_if<call::ClientError>(&end);
             declined != nullptr && declined->used_tokens) {
    // A refusal by the model: the provider counted these, up to what an answer counts for.
    // (Its lane keeps the page's charge, as for every page that fails: a refusal says
    // nothing of what the lane's pages use.)
    lease.settle(std::clamp<std::int64_t>(*declined->used_tokens, 0, most_counted(page.cost)));
  } else {
    lease.cancel();  // no usage came back: the provider counted the request, not the tokens
  }
  follow(outcome.announced);
  const std::optional<std::string> outage = outage_of(end);
  if (!outage) outage_pauses_ = 0;  // the provider is there, and takes fairlane

  if (answered != nullptr) {
    refusal_pauses_ = 0;  // the provider takes calls again
    // The lane pays what the provider counted, not what was estimated (DESIGN.md section 4).
    order_.settle(page, settled->used);
    forget(page);
    return CallVerdict{verdict::Complete{}, std::nullopt};
  }
  const auto* limited = std::get_if<call::RateLimited>(&end);
  const auto* overloaded = std::get_if<call::Overloaded>(&end);
  if (limited != nullptr || overloaded != nullptr) {
    pause_for_refusal(limited != nullptr ? limited->retry_after : overloaded->retry_after,
                      clock_.now() - outcome.latency);
    return requeue(page, "refusals by the provider's rate limit");
  }
  if (outage) {
    // All dispatch waits and no attempt is spent.
    const std::optional<Clock::duration> pause = pause_for_outage();
    CallVerdict verdict = requeue(page, "returns while the provider was " + *outage);
    verdict.outage_pause = pause;
    return verdict;
  }
  if (const auto* refused = std::get_if<call::ClientError>(&end)) {
    return fail(page, refused->reason);
  }
  if (const auto* unreadable = std::get_if<call::Unreadable>(&end)) {
    return retry_or_fail(page, unreadable->reason);
  }
  return retry_or_fail(page, std::get<call::TransientError>(end).reason);
}

CallVerdict DispatchPolicy::could_not_call(const QueuedPage& page, Lease& lease,
                                           const std::string& reason) {
  end_call(page);
  lease.cancel();
  return retry_or_fail(page, reason);
}

CallVerdict DispatchPolicy::could_not_read(const QueuedPage& page, Lease& lease,
                                           const std::string& reason) {
  end_call(page);
  lease.cancel();
  return requeue(page, fmt::format("returns while {}", reason), /*unread=*/true);
}

void DispatchPolicy::not_called(const QueuedPage& page, Lease& lease, bool to_lane) {
  end_call(page);
  lease.cancel();
  if (cancelled_jobs_.contains(page.job_id)) {
    order_.refund(page);
    forget(page);  // the store cancels it as it comes back
  } else if (to_lane) {
    order_.put_back(page);
  }
}

void DispatchPolicy::withdrawn(const QueuedPage& page, Lease& lease) {
  end_call(page);
  lease.cancel();
  order_.refund(page);
  forget(page);
}

// ---- inside ----------------------------------------------------------------------------

DispatchPolicy::PageRecord& DispatchPolicy::track(const QueuedPage& page) {
  const auto [record, added] = pages_.try_emplace(page.page_id);
  if (added) ++job_pages_[page.job_id];
  return record->second;
}

void DispatchPolicy::forget(const QueuedPage& page) {
  if (pages_.erase(page.page_id) == 0) return;
  const auto job = job_pages_.find(page.job_id);
  if (job == job_pages_.end() || --job->second > 0) return;
  job_pages_.erase(job);
  cancelled_jobs_.erase(page.job_id);
}

void DispatchPolicy::hold(const QueuedPage& page, Clock::time_point until) {
  held_.emplace(until, page);
  held_by_job_[page.job_id].insert(until);
}

void DispatchPolicy::release_held(Clock::time_point now) {
  while (!held_.empty() && held_.begin()->first <= now) {
    const auto [release, page] = *held_.begin();
    held_.erase(held_.begin());
    const auto job = held_by_job_.find(page.job_id);
    job->second.erase(job->second.find(release));
    if (job->second.empty()) held_by_job_.erase(job);
    if (cancelled_jobs_.contains(page.job_id)) {
      order_.refund(page);  // as put_back would have: its charge goes back to its lane
      forget(page);         // the store cancelled it with its job
    } else {
      order_.put_back(page);
    }
  }
}

Clock::time_point DispatchPolicy::next_release() const {
  return held_.empty() ? Clock::time_point::max() : held_.begin()->first;
}

void DispatchPolicy::end_call(const QueuedPage& page, std::optional<SendOrder::Settled> settled) {
  const auto ticket = tickets_.find(page.page_id);
  if (ticket == tickets_.end()) return;
  sends_.ended(ticket->second, settled, [this](const SendOrder::Settled& call) {
    estimator_.record_settled(call.used, call.reserved, call.latency);
  });
  tickets_.erase(ticket);
}

CallVerdict DispatchPolicy::requeue(const QueuedPage& page, const std::string& returns,
                                    bool unread) {
  PageRecord& record = track(page);
  if (++record.requeues > config_.max_requeues) {
    return fail(page, fmt::format("gave up after {} {}", record.requeues, returns));
  }
  if (cancelled_jobs_.contains(page.job_id)) {
    order_.refund(page);  // refused or unread: no tokens it used are known
    forget(page);         // the store cancels it as it comes back
  } else if (unread) {
    hold(page, clock_.now() + jittered_backoff(++record.unread));
  } else {
    order_.put_back(page);
  }
  return CallVerdict{verdict::Requeue{}, std::nullopt};
}

CallVerdict DispatchPolicy::retry_or_fail(const QueuedPage& page, const std::string& reason) {
  PageRecord& record = track(page);
  if (++record.attempts >= config_.max_attempts) {
    return fail(page, fmt::format("gave up after {} attempts: {}", record.attempts, reason));
  }
  const Clock::duration delay = jittered_backoff(record.attempts);
  hold(page, clock_.now() + delay);
  const WallTime not_before =
      wall_clock_.now() + std::chrono::duration_cast<WallTime::duration>(delay);
  return CallVerdict{verdict::Retry{reason, delay, not_before}, std::nullopt};
}

Clock::duration DispatchPolicy::jittered_backoff(std::int64_t n) {
  const Clock::duration ceiling = doubled(config_.backoff_base, n - 1, config_.backoff_max);
  return Clock::duration(std::uniform_int_distribution<Clock::duration::rep>(
      0, std::max<Clock::duration::rep>(ceiling.count() - 1, 0))(rng_));
}

CallVerdict DispatchPolicy::fail(const QueuedPage& page, std::string reason) {
  forget(page);
  return CallVerdict{verdict::Fail{std::move(reason)}, std::nullopt};
}

void DispatchPolicy::pause_for(Clock::duration d) {
  const Clock::time_point until = clock_.now() + d;
  if (!paused_ || *paused_ < until) paused_ = until;
}

void DispatchPolicy::pause_for_refusal(std::optional<Clock::duration> retry_after,
                                       Clock::time_point sent_at) {
  const Clock::time_point now = clock_.now();
  // At least default_pause, were backoff_max set below it.
  const Clock::duration longest = std::max(config_.backoff_max, config_.default_pause);
  // An overload is one while its refusals follow each other: a call sent more than the
  // longest pause after the last refusal, and the pause it ran under, ended (nothing was
  // sent in between) starts a new one, however long the old one's pauses had grown. When
  // the call went counts, not when its refusal came: a gateway may take a minute to say 503.
  if (refusal_quiet_from_ && sent_at - *refusal_quiet_from_ > longest) refusal_pauses_ = 0;
  if (retry_after && *retry_after > Clock::duration::zero()) {
    pause_for(*retry_after);  // the provider said when: as given
  } else if (!paused_ || *paused_ <= now) {
    // No hint (or 0, or a date already past, which would be no pause at all): the calls of
    // one burst come back refused one after another, and the first one's pause covers
    // them; a pause that ends in another refusal is followed by one twice as long.
    pause_for(doubled(config_.default_pause, refusal_pauses_, longest));
    ++refusal_pauses_;
  }
  refusal_quiet_from_ = std::max(now, *paused_);
}

std::optional<Clock::duration> DispatchPolicy::pause_for_outage() {
  // The calls that were out when the provider went away come back unreachable one after
  // another: the first one's pause covers them all.
  if (paused_ && *paused_ > clock_.now()) return std::nullopt;
  // One call tries again after each pause, which doubles from backoff_base to backoff_max.
  const Clock::duration pause = doubled(config_.backoff_base, outage_pauses_, config_.backoff_max);
  ++outage_pauses_;
  pause_for(pause);
  return pause;
}

std::unordered_map<JobId, Clock::duration> DispatchPolicy::held_back() const {
  std::unordered_map<JobId, Clock::duration> held;
  for (const auto& [job, releases] : held_by_job_) held[job] = *held_back(job);
  return held;
}

std::optional<Clock::duration> DispatchPolicy::held_back(JobId job) const {
  const auto it = held_by_job_.find(job);
  if (it == held_by_job_.end()) return std::nullopt;
  return *it->second.rbegin() - clock_.now();
}

std::vector<JobId> DispatchPolicy::tracked_jobs() const {
  std::vector<JobId> jobs;
  jobs.reserve(job_pages_.size());
  for (const auto& [job, pages] : job_pages_) {
    if (!cancelled_jobs_.contains(job)) jobs.push_back(job);
  }
  return jobs;
}

}  // namespace fairlane
