// Promises: the ETA each accepted job was promised at the door, kept honest. Once a second
// (Router::tick) every job still running is projected again, now + its ETA now (+ what is
// left of a pause of all dispatch); when that passes what was promised (or last announced)
// by more than the slack, max(2 s, 10% of the promise), the later finish is recorded with
// its reason (Store::revise_eta) and the job's watchers are told, so the change reaches
// its event stream before the promise passes. Reasons, in order: dispatch paused (the
// provider's Retry-After, or the provider unreachable); the provider slower than when the
// promise was made (its rate mu down by a tenth: lower limits, longer calls); otherwise
// more work arrived ahead of the job than expected.
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
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "fairlane/core/ids.hpp"
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
  using WallClock = std::function<WallTime()>;
  static constexpr std::size_t kRecent = 1'000;

  // `store` and `dispatcher` must outlive the promises. `wall_clock`: system_clock by default.
  Promises(Store& store, const Dispatcher& dispatcher, WallClock wall_clock = {});

  // A job just accepted with a promise (JobView::promised_eta_at): watch it.
  void promised(const JobView& job);

  // Projects every watched job again; returns the jobs whose ETA was revised now.
  std::vector<JobId> check();

  [[nodiscard]] std::size_t watched() const { return watched_.size(); }
  [[nodiscard]] PromiseAccuracy accuracy() const;
  [[nodiscard]] const Histogram& ratio() const { return ratio_; }
  [[nodiscard]] const Histogram& lateness() const { return lateness_; }

 private:
  struct Watched {
    UserId user = 0;
    WallTime created_at;
    WallTime promised_at;
    std::optional<WallTime> announced_at;  // the last revision
    double mu = 0.0;                       // the rate when the promise was made
  };

  // Why `w` would finish later than announced, from the dispatcher's state now.
  [[nodiscard]] std::string reason(const Watched& w) const;
  // Records a job that ended; true when it has (and is no longer watched).
  bool ended(JobId job, const Watched& w);

  Store& store_;
  const Dispatcher& dispatcher_;
  const WallClock wall_clock_;
  std::unordered_map<JobId, Watched> watched_;
  std::int64_t finished_ = 0;
  std::deque<double> recent_ratio_;
  std::deque<double> recent_lateness_;
  Histogram ratio_{{0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 5.0}};
  Histogram lateness_{{-300, -60, -30, -10, -5, -1, 0, 1, 5, 10, 30, 60, 300}};
};

}  // namespace fairlane::service
