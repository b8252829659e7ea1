#include "fairlane/core/promise_order.hpp"

#include <algorithm>
#include <cassert>

namespace fairlane {
PromiseOrder::PromiseOrder(FairScheduler& scheduler, const Estimator& estimator, const Clock& clock,
                           PromiseOrderConfig config)
    : scheduler_(scheduler), estimator_(estimator), clock_(clock), config_(config) {}

void PromiseOrder::promise(UserId user, JobId job, Clock::time_point finish_by) {
  if (!config_.keep_promises) return;
  forget_promise(job);
  promises_[job] = Promise{user, clock_.now(), finish_by};
  by_promise_.emplace(finish_by, job);
}

void PromiseOrder::forget_promise(JobId job) {
  const auto it = promises_.find(job);
  if (it == promises_.end()) return;
  by_promise_.erase({it->second.finish_by, job});
  promises_.erase(it);
  if (at_risk_ == job) at_risk_.reset();
}

void PromiseOrder::join(const QueuedPage& page, Clock::time_point at) {
  if (joined_.try_emplace(page.job_id, Joined{at, page.user_id}).second) {
    by_joined_.emplace(at, page.job_id);
  }
}

void PromiseOrder::leave(JobId job) {
  const auto it = joined_.find(job);
  if (it == joined_.end()) return;
  by_joined_.erase({it->second.at, job});
  joined_.erase(it);
}

void PromiseOrder::add(const QueuedPage& page) {
  join(page, clock_.now());
  scheduler_.add(page);
}

void PromiseOrder::put_back(const QueuedPage& page) {
  // A job that had left its lane comes back as old work, not as a newcomer.
  join(page, Clock::time_point::min());
  scheduler_.put_back(page);
}

std::vector<QueuedPage> PromiseOrder::remove_job(UserId user, JobId job) {
  forget_promise(job);
  leave(job);
  return scheduler_.remove_job(user, job);
}

std::optional<JobEstimate> PromiseOrder::project(const Estimator& estimator, UserId user,
                                                 JobId job) const {
  const auto held = promises_.find(job);
  if (held == promises_.end() || held->second.finish_by < clock_.now() ||
      scheduler_.lane_jobs(user) != 1) {
    return PageOrder::project(estimator, user, job);
  }
  // Sharing, unless that passes the promise; then the newer turns it needs, to the promise,
  // or all of them, past it.
  const std::optional<JobEstimate> sharing = PageOrder::project(estimator, user, job);
  const double left_s = seconds_left(held->second, clock_.now());
  if (!sharing || sharing->eta_seconds <= left_s) return sharing;
  std::optional<JobEstimate> helped =
      with_newer_turns(estimator, user, job, held->second, Refunds::expected);
  if (helped) helped->eta_seconds = std::max(helped->eta_seconds, left_s);
  return helped;
}

std::optional<JobEstimate> PromiseOrder::with_newer_turns(const Estimator& estimator, UserId user,
                                                          JobId job, const Promise& p,
                                                          Refunds refunds) const {
  return estimator.job(user, job, refunds, Competition::held_off, newer_work(user, p));
}

std::vector<LaneTail> PromiseOrder::newer_work(UserId user, const Promise& p) const {
  // The newest jobs first, down to the promise: one tail a lane, its pages and tokens.
  std::vector<LaneTail> tails;
  std::unordered_map<UserId, std::size_t> tail_of;
  std::size_t walked = 0;
  for (auto it = by_joined_.rbegin();
       it != by_joined_.rend() && newer(it->first, p) && walked < kMostNewer; ++it, ++walked) {
    const UserId other = joined_.at(it->second).user;
    const auto place = scheduler_.job_place(other, it->second);
    if (other == user || !place) continue;
    const auto [slot, added] = tail_of.try_emplace(other, tails.size());
    if (added) tails.push_back(LaneTail{other, 0, 0});
    tails[slot->second].pages += place->queued;
    tails[slot->second].tokens += place->tokens;
  }
  return tails;
}

double PromiseOrder::help_needed(UserId user, JobId job, const Promise& p, double sharing_s,
                                 Clock::time_point now) const {
  const double left_s = seconds_left(p, now);
  const std::optional<JobEstimate> helped =
      with_newer_turns(estimator_, user, job, p, Refunds::when_back);
  if (!helped || helped->eta_seconds >= left_s || !(sharing_s > helped->eta_seconds)) return 1.0;
  return std::clamp((sharing_s - left_s) / (sharing_s - helped->eta_seconds), 0.0, 1.0);
}

void PromiseOrder::review_if_due() {
  const Clock::time_point now = clock_.now();
  if (next_review_ && now < *next_review_) return;
  next_review_ = now + config_.review_every;
  const std::optional<JobId> helped_before = at_risk_;
  at_risk_.reset();
  // Going first cannot keep a promise that has passed; the service has revised its ETA.
  while (!by_promise_.empty() && by_promise_.begin()->first < now) {
    forget_promise(by_promise_.begin()->second);
  }
  std::size_t reviewed = 0;
  for (auto it = by_promise_.begin(); it != by_promise_.end() && reviewed < config_.reviewed;) {
    const auto [finish_by, job] = *it++;
    const UserId user = promises_.at(job).user;
    // Projected as the promise was made (the refunds of the calls out when back), so that a
    // job is not taken for safe by the difference of two rules.
    const std::optional<JobEstimate> estimate = estimator_.job(user, job, Refunds::when_back);
    if (!estimate) {
      forget_promise(job);
      continue;
    }
    ++reviewed;
    // A user with several jobs queued is not helped: its shelf would delay newcomers.
    if (scheduler_.lane_jobs(user) != 1) continue;
    if (now + from_seconds(estimate->eta_seconds) > finish_by) {
      at_risk_ = job;
      help_share_ = help_needed(user, job, promises_.at(job), estimate->eta_seconds, now);
      if (at_risk_ != helped_before) help_credit_ = 0.0;
      return;
    }
  }
}

const QueuedPage* PromiseOrder::instead_of(const QueuedPage& fair) const {
  return taken_instead(newer_turn(fair));
}

const QueuedPage* PromiseOrder::newer_turn(const QueuedPage& fair) const {
  if (!at_risk_) return nullptr;
  const Promise& p = promises_.at(*at_risk_);
  if (fair.user_id == p.user) return nullptr;
  const auto joined = joined_.find(fair.job_id);
  if (joined == joined_.end() || !newer(joined->second.at, p)) return nullptr;
  // The job was its lane's only one at the review, so its next page is the lane's head; a
  // head of another job means its pages are all out, and a later job of the same user (come
  // since) is not owed its promise.
  const QueuedPage* head = scheduler_.peek_lane(p.user);
  return head != nullptr && head->job_id == *at_risk_ ? head : nullptr;
}

const QueuedPage* PromiseOrder::peek() {
  if (!promises_.empty()) review_if_due();
  const QueuedPage* fair = scheduler_.peek();
  if (fair == nullptr) return nullptr;
  if (const QueuedPage* page = instead_of(*fair)) return page;
  return fair;
}

QueuedPage PromiseOrder::take() {
  const QueuedPage* fair = scheduler_.peek();
  assert(fair != nullptr && "take() without a page to take: peek() first");
  std::optional<QueuedPage> page;
  // As peek() decided; then each newer turn earns the job at risk its share of a turn, and
  // a whole one taken is spent.
  const QueuedPage* turn = newer_turn(*fair);
  const QueuedPage* instead = taken_instead(turn);
  if (turn != nullptr) help_credit_ += help_share_;
  if (instead != nullptr) {
    help_credit_ -= 1.0;
    const UserId user = instead->user_id;
    scheduler_.give_turn();
    page = scheduler_.take_from(user);
    ++out_of_turn_;
  } else {
    page = scheduler_.take();
  }
  assert(page);
  taken(*page);
  return *page;
}

void PromiseOrder::taken(const QueuedPage& page) {
  if (!scheduler_.job_place(page.user_id, page.job_id)) leave(page.job_id);
}

}  // namespace fairlane
