// Promises: the ETA each accepted job was promised at the door, kept honest. Once a second
// (Router::tick) the PromiseWatch (core/promise_watch) projects the jobs due to be looked at
// again; a job whose projected finish passes what it was told by more than the slack gets
// the later finish recorded with its reason (Store::revise_eta), and its watchers are told,
// so the change reaches its event stream before the promise passes.
//
// When a job ends, done or failed, its actual time over the promised one, and its lateness
// (finish - promised finish, negative when early), go into two histograms for /metrics and
// into the last 1,000 for /v1/queue's p50 and p90 (docs/api.md). Cancelled jobs count in
// neither: nobody waited for them to finish.
//
// Jobs accepted before a restart are watched again after it: the Dispatcher's start() names
// the restored jobs with a promise, and the Router hands them here. Thread safety: none; it
// lives on the io_context thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "fairlane/core/ids.hpp"
#include "fairlane/core/promise_watch.hpp"
#include "fairlane/core/wall_clock.hpp"
#include "fairlane/store/job.hpp"
#include "service/metrics.hpp"

namespace fairlane {
class Store;
}

namespace fairlane::service {

class Dispatcher;

// The door's recent honesty: quantiles of the last finished jobs.
struct PromiseAccuracy {
  std::int64_t finished = 0;                         // jobs that ended with a promise, ever
  std::optional<double> ratio_p50, ratio_p90;        // actual / promised time
  std::optional<double> lateness_p50, lateness_p90;  // seconds after the promised finish
};

class Promises {
 public:
  static constexpr std::size_t kRecent = 1'000;

  // `store`, `dispatcher` and `wall_clock` must outlive the promises. `wall_clock`: nullptr
  // for the system clock (tests give a FakeWallClock).
  Promises(Store& store, const Dispatcher& dispatcher, const WallClock* wall_clock = nullptr);

  // A job just accepted with a promise (JobView::promised_eta_at): watch it; or, when it
  // has already ended (inside its promise window), measure it.
  void promised(const JobView& job);

  // Projects the watched jobs due for a look (PromiseWatch); returns those revised now.
  std::vector<JobId> check();

  [[nodiscard]] std::size_t watched() const { return watch_.watched(); }
  // What the door promised a watched job (std::nullopt when it is not watched).
  [[nodiscard]] std::optional<WallTime> promised_at(JobId job) const {
    return watch_.promised_at(job);
  }
  [[nodiscard]] PromiseAccuracy accuracy() const;
  [[nodiscard]] const Histogram& ratio() const { return ratio_; }
  [[nodiscard]] const Histogram& lateness() const { return lateness_; }

 private:
  // Why a job would finish later than announced, in words, from the dispatcher's state now.
  [[nodiscard]] std::string reason(const Revision& revision) const;
  // Records a job that ended; true when it has (and is no longer watched).
  bool ended(JobId job, const WatchedPromise& w);
  // Its actual time over the promised one, and its lateness, when it ended done or failed.
  void measure(const JobView& job, WallTime created_at, WallTime promised_at);

  Store& store_;
  const Dispatcher& dispatcher_;
  const SystemWallClock system_clock_;
  const WallClock& wall_clock_;
  PromiseWatch watch_;
  std::int64_t finished_ = 0;
  std::deque<double> recent_ratio_;
  std::deque<double> recent_lateness_;
  Histogram ratio_{{0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 5.0}};
  Histogram lateness_{{-300, -60, -30, -10, -5, -1, 0, 1, 5, 10, 30, 60, 300}};
};

}  // namespace fairlane::service
