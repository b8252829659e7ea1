#include "service/promises.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "fairlane/store/store.hpp"
#include "service/dispatcher.hpp"

namespace fairlane::service {
namespace {

using Seconds = std::chrono::duration<double>;

std::optional<double> quantile(const std::deque<double>& values, double q) {
  if (values.empty()) return std::nullopt;
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  const auto index = static_cast<std::size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size() - 1, index == 0 ? 0 : index - 1)];
}

void keep(std::deque<double>& recent, double value) {
  recent.push_back(value);
  if (recent.size() > Promises::kRecent) recent.pop_front();
}

}  // namespace

Promises::Promises(Store& store, const Dispatcher& dispatcher, const WallClock* wall_clock)
    : store_(store),
      dispatcher_(dispatcher),
      wall_clock_(wall_clock != nullptr ? *wall_clock : system_clock_) {}

void Promises::promised(const JobView& job) {
  if (!job.promised_eta_at) return;
  if (is_terminal(job.state)) {
    // Ended before it was watched: inside its promise window (a fast provider, pages that
    // all failed at once). Measured all the same; there is nothing left to watch.
    measure(job, job.created_at, *job.promised_eta_at);
    return;
  }
  watch_.watch(job.user_id, job.id, job.created_at, *job.promised_eta_at, job.eta_revised_at,
               dispatcher_.estimator(), wall_clock_.now());
}

std::vector<JobId> Promises::check() {
  const WallTime now = wall_clock_.now();
  std::vector<JobId> revised;
  for (const Revision& revision : watch_.check(
           dispatcher_.estimator(), dispatcher_.order(), now, dispatcher_.policy().paused_for(),
           [this](JobId job, const WatchedPromise&w) { return ended(job, w); },
           dispatcher_.policy().held_back())) {
    if (store_.revise_eta(revision.job, revision.finish, reason(revision)).ok()) {
      watch_.announced(revision.job, revision.finish);
      revised.push_back(revision.job);
    }
  }
  return revised;
}

std::string Promises::reason(const Revision& revision) const {
  const Estimator& estimator = dispatcher_.estimator();
  switch (revision.reason) {
    case RevisionReason::dispatch_paused:
      return "the provider asked fairlane to wait (a 429 or 503), could not be reached, or "
             "refused fairlane's key: all dispatch is paused";
    case RevisionReason::page_retrying:
      return "one of its pages waits to be tried again (its call failed, or its text could not "
             "be read from the store): it goes after a backoff";
    case RevisionReason::provider_slower:
      return fmt::format(
          "the provider got slower: {:.2f} pages a second now, {:.2f} when this job was "
          "accepted (its {} limit binds; calls take {:.1f} s)",
          revision.mu_now, revision.mu_then, to_string(estimator.binding()),
          estimator.avg_latency_s());
    case RevisionReason::more_work_ahead:
      break;
  }
  return "more work arrived ahead of this job than expected";
}

bool Promises::ended(JobId job, const WatchedPromise& w) {
  auto view = store_.job(job);
  // A job gone from the store ended long ago and was pruned (retention) before this look:
  // there is nothing left to watch, nor to measure.
  if (view.status().code() == StatusCode::not_found) return true;
  if (!view.ok()) return false;
  if (!is_terminal(view->state)) return false;
  measure(view.value(), w.created_at, w.promised_at);
  return true;
}

void Promises::measure(const JobView& job, WallTime created_at, WallTime promised_at) {
  if (job.state == JobState::cancelled || !job.finished_at) return;
  const double actual = Seconds(*job.finished_at - created_at).count();
  const double promised = Seconds(promised_at - created_at).count();
  const double late = Seconds(*job.finished_at - promised_at).count();
  if (promised > 0) {
    ratio_.observe(actual / promised);
    keep(recent_ratio_, actual / promised);
  }
  lateness_.observe(late);
  keep(recent_lateness_, late);
  ++finished_;
}

PromiseAccuracy Promises::accuracy() const {
  return PromiseAccuracy{finished_, quantile(recent_ratio_, 0.5), quantile(recent_ratio_, 0.9),
                         quantile(recent_lateness_, 0.5), quantile(recent_lateness_, 0.9)};
}

}  // namespace fairlane::service
