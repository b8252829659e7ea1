#include "fairlane/core/promise_order.hpp"

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

void PromiseOrder::add(const QueuedPage& page) {
  joined_.try_emplace(page.job_id, clock_.now());
  scheduler_.add(page);
}

void PromiseOrder::put_back(const QueuedPage& page) {
  // A job that had left its lane comes back as old work, not as a newcomer.
  joined_.try_emplace(page.job_id, Clock::time_point::min());
  scheduler_.put_back(page);
}

std::vector<QueuedPage> PromiseOrder::remove_job(UserId user, JobId job) {
  forget_promise(job);
  joined_.erase(job);
  return scheduler_.remove_job(user, job);
}

void PromiseOrder::review_if_due() {
  const Clock::time_point now = clock_.now();
  if (next_review_ && now < *next_review_) return;
  next_review_ = now + config_.review_every;
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
      return;
    }
  }
}

const QueuedPage* PromiseOrder::instead_of(const QueuedPage& fair) const {
  if (!at_risk_) return nullptr;
  const Promise& p = promises_.at(*at_risk_);
  if (fair.user_id == p.user) return nullptr;
  const auto joined = joined_.find(fair.job_id);
  if (joined == joined_.end() || joined->second <= p.made_at + config_.seen_within) {
    return nullptr;
  }
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
  if (const QueuedPage* instead = instead_of(*fair)) {
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
  if (!scheduler_.job_place(page.user_id, page.job_id)) joined_.erase(page.job_id);
}

}  // namespace fairlane
