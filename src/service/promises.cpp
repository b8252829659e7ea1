#include "service/promises.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "fairlane/store/store.hpp"
#include "service/dispatcher.hpp"

namespace fairlane::service {
namespace {

using Seconds = std::chrono::duration<double>;

WallTime::duration wall_duration(double seconds) {
  return std::chrono::duration_cast<WallTime::duration>(Seconds(seconds));
}

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

Promises::Promises(Store& store, const Dispatcher& dispatcher, WallClock wall_clock)
    : store_(store),
      dispatcher_(dispatcher),
      wall_clock_(wall_clock ? std::move(wall_clock)
                             : WallClock([] { return std::chrono::system_clock::now(); })) {}

void Promises::promised(const JobView& job) {
  if (!job.promised_eta_at || is_terminal(job.state)) return;
  watched_[job.id] = Watched{job.user_id, job.created_at, *job.promised_eta_at, job.eta_revised_at,
                             dispatcher_.estimator().mu()};
}

std::vector<JobId> Promises::check() {
  const WallTime now = wall_clock_();
  const Estimator& estimator = dispatcher_.estimator();
  // A pause of all dispatch delays every job by what is left of it.
  double paused_s = 0.0;
  if (const auto until = dispatcher_.paused_until()) {
    paused_s = std::max(Seconds(*until - SteadyClock().now()).count(), 0.0);
  }
  std::vector<JobId> revised;
  for (auto it = watched_.begin(); it != watched_.end();) {
    const JobId job = it->first;
    Watched& w = it->second;
    double eta_s = estimator.avg_latency_s();
    if (const auto estimate = estimator.job(w.user, job)) {
      eta_s = estimate->eta_seconds;
    } else if (ended(job, w)) {
      // Nothing queued: it may have ended.
      it = watched_.erase(it);
      continue;
    }
    const WallTime projected = now + wall_duration(eta_s + paused_s);
    const WallTime announced = w.announced_at.value_or(w.promised_at);
    const double promised_s = Seconds(w.promised_at - w.created_at).count();
    const WallTime::duration slack = wall_duration(std::max(2.0, 0.1 * promised_s));
    if (projected > announced + slack) {
      if (store_.revise_eta(job, projected, reason(w)).ok()) {
        w.announced_at = projected;
        revised.push_back(job);
      }
    }
    ++it;
  }
  return revised;
}

std::string Promises::reason(const Watched& w) const {
  const Estimator& estimator = dispatcher_.estimator();
  if (const auto until = dispatcher_.paused_until(); until && *until > SteadyClock().now()) {
    return "the provider asked fairlane to wait (a 429 or 503 with Retry-After), or could not "
           "be reached: all dispatch is paused";
  }
  const double mu = estimator.mu();
  if (w.mu > 0 && mu < 0.9 * w.mu) {
    return fmt::format(
        "the provider got slower: {:.2f} pages a second now, {:.2f} when this job was accepted "
        "(its {} limit binds; calls take {:.1f} s)",
        mu, w.mu, to_string(estimator.binding()), estimator.avg_latency_s());
  }
  return "more work arrived ahead of this job than expected";
}

bool Promises::ended(JobId job, const Watched& w) {
  auto view = store_.job(job);
  if (!view.ok()) return false;
  if (!is_terminal(view->state)) return false;
  if (view->state != JobState::cancelled && view->finished_at) {
    const double actual = Seconds(*view->finished_at - w.created_at).count();
    const double promised = Seconds(w.promised_at - w.created_at).count();
    const double late = Seconds(*view->finished_at - w.promised_at).count();
    if (promised > 0) {
      ratio_.observe(actual / promised);
      keep(recent_ratio_, actual / promised);
    }
    lateness_.observe(late);
    keep(recent_lateness_, late);
    ++finished_;
  }
  return true;
}

PromiseAccuracy Promises::accuracy() const {
  return PromiseAccuracy{finished_, quantile(recent_ratio_, 0.5), quantile(recent_ratio_, 0.9),
                         quantile(recent_lateness_, 0.5), quantile(recent_lateness_, 0.9)};
}

}  // namespace fairlane::service
