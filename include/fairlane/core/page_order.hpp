// PageOrder: the order in which queued pages go to the provider, as DispatchPolicy sees it.
// The policy peeks the next page, waits for the budget, takes that same page, returns
// pages to the head after a refusal and corrects a lane by what a call really cost; it
// never reorders on its own. FairOrder is fairlane's (a FairScheduler: deficit round robin
// over per-user lanes); PromiseOrder (promise_order.hpp) is fair order that lets a job whose
// promise is at risk go first; the simulator adds first come first served for comparison.
//
// Thread safety: none, by design; the thread that owns the policy owns its order.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "fairlane/core/clock.hpp"
#include "fairlane/core/estimator.hpp"
#include "fairlane/core/fair_scheduler.hpp"
#include "fairlane/core/ids.hpp"

namespace fairlane {

class PageOrder {
 public:
  virtual ~PageOrder() = default;

  // The next page, or nullptr when none is queued. The same page until it is taken; the
  // pointer is valid until the next change.
  [[nodiscard]] virtual const QueuedPage* peek() = 0;
  // Takes the page peek() returns; only called when it returned one.
  virtual QueuedPage take() = 0;
  // A page joins the tail of its user's queue.
  virtual void add(const QueuedPage& page) = 0;
  // A page taken earlier goes back to the head: it keeps its place.
  virtual void put_back(const QueuedPage& page) = 0;
  // A page taken earlier settled: the provider counted `used` tokens for its call.
  virtual void settle(const QueuedPage& page, std::int64_t used) = 0;
  // A page taken earlier made no call the provider counted, and does not come back.
  virtual void refund(const QueuedPage& page) = 0;
  // Removes every queued page of `job` (a cancellation) and returns them.
  virtual std::vector<QueuedPage> remove_job(UserId user, JobId job) = 0;
  // The door promised `job` of `user` it would be done by `finish_by`. An order that keeps
  // promises (PromiseOrder) may let the job go first when that is at risk; others ignore it.
  virtual void promise(UserId /*user*/, JobId /*job*/, Clock::time_point /*finish_by*/) {}
  // Where a queued job of `user` stands as this order serves it, from `estimator` (over the
  // order's scheduler): the expected finish, the refunds of the calls out counted as they
  // come back. std::nullopt when none of its pages is queued. What the PromiseWatch projects.
  // Fair order shares with every lane, and with the work expected to arrive.
  [[nodiscard]] virtual std::optional<JobEstimate> project(const Estimator& estimator, UserId user,
                                                           JobId job) const {
    return estimator.job(user, job, Refunds::expected, Competition::expected);
  }
};

// Fair order: the FairScheduler's. The scheduler must outlive it.
class FairOrder final : public PageOrder {
 public:
  explicit FairOrder(FairScheduler& scheduler) : scheduler_(scheduler) {}

  [[nodiscard]] const QueuedPage* peek() override { return scheduler_.peek(); }
  QueuedPage take() override;
  void add(const QueuedPage& page) override { scheduler_.add(page); }
  void put_back(const QueuedPage& page) override { scheduler_.put_back(page); }
  void settle(const QueuedPage& page, std::int64_t used) override { scheduler_.settle(page, used); }
  void refund(const QueuedPage& page) override { scheduler_.refund(page); }
  std::vector<QueuedPage> remove_job(UserId user, JobId job) override {
    return scheduler_.remove_job(user, job);
  }

 private:
  FairScheduler& scheduler_;
};

}  // namespace fairlane
