#include "service/dispatcher.hpp"
#include "fairlane/core/backoff.hpp"
#include "provider/listen.hpp"

#include <fmt/format.h>

#include <boost/asio.hpp>
#include <iostream>
#include <string_view>
#include <unordered_set>
#include <variant>

namespace fairlane::service {
namespace {

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;

// Reports, rather than swallows, an exception that ends a coroutine.
constexpr ReportFailure report_failure{"fairlane: the dispatcher failed"};

EstimatorConfig estimator_config(const DispatcherConfig& config) {
  EstimatorConfig c = config.estimator;
  c.limits = config.limits;
  return c;
}

DoorConfig door_config(const DispatcherConfig& config) {
  DoorConfig c = config.door;
  c.tokens_per_minute = config.limits.tokens_per_minute;
  return c;
}

// Why a failed attempt failed, in a sentence for the page's error.
std::string reason_of(const OutcomeKind& kind, int status) {
  return std::visit(
      [status](const auto& o) -> std::string {
        using T = std::decay_t<decltype(o)>;
        if constexpr (std::is_same_v<T, outcome::ServerError>) {
          return fmt::format("the provider answered {} ({})", o.status, o.detail);
        } else if constexpr (std::is_same_v<T, outcome::ClientError>) {
          return fmt::format("the provider refused the request with {} ({})", o.status, o.detail);
        } else if constexpr (std::is_same_v<T, outcome::Timeout>) {
          return "the provider did not answer in time";
        } else if constexpr (std::is_same_v<T, outcome::ConnectionError>) {
          return fmt::format("could not reach the provider ({})", o.detail);
        } else if constexpr (std::is_same_v<T, outcome::BadResponse>) {
          return fmt::format("the provider's answer was unusable: {}", o.why);
        } else {
          return fmt::format("the provider answered {}", status);
        }
      },
      kind);
}

}  // namespace

struct Dispatcher::Impl : std::enable_shared_from_this<Impl> {
  Impl(asio::io_context& context, Store& s, Provider& p, DispatcherConfig c)
      : io(context),
        store(s),
        provider(p),
        config(std::move(c)),
        budget(clock, config.limits),
        scheduler(config.quantum),
        estimator(scheduler, estimator_config(config), &budget),
        door(scheduler, estimator, door_config(config)),
        commits(store, clock, config.commits),
        wake(context),
        commit_timer(context),
        stop_timer(context),
        rng(config.seed) {}

  struct PageInfo {
    std::int64_t attempts = 0;
    std::int64_t requeues = 0;
    // When it joined its lane, until its first call (for the queue wait histogram).
    std::optional<Clock::time_point> queued_at;
  };

  asio::io_context& io;
  Store& store;
  Provider& provider;
  const DispatcherConfig config;
  SteadyClock clock;
  Budget budget;
  FairScheduler scheduler;
  Estimator estimator;
  Door door;
  GroupCommit commits;
  asio::steady_timer wake;  // the loop sleeps on it; signal() cuts the sleep short
  asio::steady_timer commit_timer;
  bool commit_timer_armed = false;
  asio::steady_timer stop_timer;
  std::mt19937_64 rng;

  // Every page queued, held back or in flight, and how many of them each job has: a
  // cancelled job is remembered (so that its pages that come back are not queued again)
  // only while it has some.
  std::unordered_map<PageId, PageInfo> pages;
  std::unordered_map<JobId, std::int64_t> job_pages;
  std::unordered_set<JobId> cancelled_jobs;
  std::unordered_set<asio::steady_timer*> hold_timers;  // pages held back for a backoff
  // Places under the in-flight cap held for a previous process's calls, until they end.
  std::unordered_set<asio::steady_timer*> inherited_timers;
  Status commit_error;  // the last flush's failure, ok after a flush that went through
  bool dead = false;    // the Dispatcher is gone: touch neither the store nor the provider
  std::optional<Clock::time_point> paused;
  std::int64_t outage_pauses = 0;  // in a row, while the provider cannot be reached
  std::int64_t in_flight = 0;
  bool looping = false;
  bool stopping = false;
  std::function<void(Status)> stopped;
  DispatcherCounters counters;
  JobChanged job_changed;

  void signal() { wake.cancel(); }

  // The page's entry, made if it has none.
  PageInfo& track(const QueuedPage& page) {
    const auto [info, added] = pages.try_emplace(page.page_id);
    if (added) ++job_pages[page.job_id];
    return info->second;
  }
  // The page has ended, or left for good: its entry goes, and its job's once it has none.
  void forget(const QueuedPage& page) {
    if (pages.erase(page.page_id) == 0) return;
    const auto job = job_pages.find(page.job_id);
    if (job == job_pages.end() || --job->second > 0) return;
    job_pages.erase(job);
    cancelled_jobs.erase(page.job_id);
  }

  awaitable<void> sleep_until(Clock::time_point t) {
    wake.expires_at(t);
    boost::system::error_code ignored;
    co_await wake.async_wait(asio::redirect_error(use_awaitable, ignored));
  }

  awaitable<void> loop(std::shared_ptr<Impl> self);
  awaitable<void> run_call(std::shared_ptr<Impl> self, QueuedPage page, Lease lease);
  awaitable<void> hold(std::shared_ptr<Impl> self, QueuedPage page, Clock::duration delay);
  // Holds `permit` for `delay` (a call of a previous process, still at the provider).
  awaitable<void> hold_place(std::shared_ptr<Impl> self, InFlightCap::Permit permit,
                             Clock::duration delay);
  // At start: a place for each call still out, until it could have ended.
  Status inherit_calls_out();
  void cancel_timers();

  // Submits a transition to the group commit; `done` (and the job's watchers) hear of it
  // once it has committed.
  void submit(PageTransition transition, JobId job, GroupCommit::Committed done = {});
  void flush_when_due();
  awaitable<std::int64_t> commit(PageTransition transition, JobId job);
  awaitable<ProviderOutcome> call_provider(ProviderRequest request);

  void handle(const QueuedPage& page, std::int64_t call, Lease& lease, const ProviderOutcome& o);
  // `returns` names what sent the page back, for its error if it returns too often.
  void requeue(const QueuedPage& page, std::int64_t call, std::string_view returns);
  void retry_or_fail(const QueuedPage& page, std::int64_t call, const std::string& reason);
  void fail(const QueuedPage& page, std::int64_t call, const std::string& reason);
  void pause_for(Clock::duration d);
  void pause_for_outage(const std::string& reason);
  void sync_down(const RateLimitHeaders& limits);
  void maybe_stopped();
  void finish_stop();
};

awaitable<void> Dispatcher::Impl::loop(std::shared_ptr<Impl> self) {
  looping = true;
  while (!stopping) {
    const Clock::time_point now = clock.now();
    if (paused && *paused > now) {
      co_await sleep_until(*paused);
      continue;
    }
    paused.reset();
    if (outage_pauses > 0 && in_flight > 0) {
      // The provider was unreachable: one call at a time finds out whether it is back.
      co_await sleep_until(Clock::time_point::max());
      continue;
    }
    const QueuedPage* next = scheduler.peek();
    if (next == nullptr) {
      co_await sleep_until(Clock::time_point::max());
      continue;
    }
    Admission admission = budget.admit(next->cost);
    if (const auto* wait = std::get_if<Wait>(&admission)) {
      // A bucket: sleep to the exact refill time. The in-flight cap: until a call ends.
      co_await sleep_until(wait->wait > Clock::duration::zero() ? now + wait->wait
                                                                : Clock::time_point::max());
      continue;
    }
    const QueuedPage page = *scheduler.take();
    if (const auto* too_large = std::get_if<TooLarge>(&admission)) {
      fail(page, 0,
           fmt::format("the page needs {} tokens, more than the provider's {} a minute",
                       too_large->tokens, too_large->capacity));
      continue;
    }
    ++in_flight;
    asio::co_spawn(io, run_call(self, page, std::move(std::get<Lease>(admission))), report_failure);
  }
  looping = false;
  maybe_stopped();
}

awaitable<void> Dispatcher::Impl::run_call(std::shared_ptr<Impl> self, QueuedPage page,
                                           Lease lease_argument) {
  // Locals go before parameters when a frame is destroyed (the parameters' own order is
  // the compiler's): holding the state in a local first keeps it alive until the lease,
  // which points into it, is gone.
  const std::shared_ptr<Impl> keep = std::move(self);
  Lease lease = std::move(lease_argument);
  PageTransition dispatched = PageTransition::dispatched(page.page_id, page.cost);
  const std::int64_t call = co_await commit(std::move(dispatched), page.job_id);
  if (dead) co_return;
  const auto end = [this] {
    --in_flight;
    signal();
    maybe_stopped();
  };
  if (call == 0) {
    // The page is no longer queued in the store (its job was cancelled meanwhile).
    lease.cancel();
    forget(page);
    end();
    co_return;
  }
  if (stopping || (paused && *paused > clock.now())) {
    // A 429 or a stop came while this dispatch was being committed: the call has not been
    // made, so the page goes back without spending anything but the request.
    lease.cancel();
    submit(PageTransition::requeued(page.page_id, call), page.job_id);
    if (cancelled_jobs.contains(page.job_id)) {
      forget(page);
    } else if (!stopping) {
      scheduler.put_back(page);
    }
    end();
    co_return;
  }
  ++counters.dispatched;
  if (const auto info = pages.find(page.page_id); info != pages.end() && info->second.queued_at) {
    counters.queue_wait_seconds.observe(
        std::chrono::duration<double>(clock.now() - *info->second.queued_at).count());
    info->second.queued_at.reset();
  }
  auto page_call = store.page_call(page.page_id);
  if (!page_call.ok()) {
    lease.cancel();
    retry_or_fail(page, call,
                  fmt::format("its text could not be read: {}", page_call.status().message()));
    end();
    co_return;
  }
  PageCall what = std::move(page_call).value();
  ProviderRequest request{config.prompt, std::move(what.text), config.model, what.max_tokens};
  const ProviderOutcome outcome = co_await call_provider(std::move(request));
  if (dead) co_return;
  handle(page, call, lease, outcome);
  end();
}

void Dispatcher::Impl::handle(const QueuedPage& page, std::int64_t call, Lease& lease,
                              const ProviderOutcome& o) {
  ++counters.outcomes[std::string(outcome_name(o.kind))];
  counters.call_latency_seconds.observe(std::chrono::duration<double>(o.latency).count());
  // Settle (or cancel) first, then lower the buckets to what the provider says is left:
  // the other way round, the refund would undo what its headers said.
  const auto* ok = std::get_if<outcome::Ok>(&o.kind);
  if (ok != nullptr) {
    lease.settle(ok->input_tokens + ok->output_tokens);
  } else if (std::holds_alternative<outcome::BadResponse>(o.kind) && o.http_status / 100 == 2) {
    // The provider ran the call and counted its tokens, but its answer cannot be read:
    // count what was reserved, the side that never overspends.
    lease.settle(lease.reserved_tokens());
  } else {
    lease.cancel();  // no usage came back: the provider counted the request, not the tokens
  }
  sync_down(o.limits);
  const auto* lost = std::get_if<outcome::ConnectionError>(&o.kind);
  if (lost == nullptr || !lost->unreachable) outage_pauses = 0;  // the provider is there
  if (ok != nullptr) {
    const std::int64_t used = ok->input_tokens + ok->output_tokens;
    estimator.record_settled(used, page.cost, o.latency);
    // The lane pays what the provider counted, not what was estimated (DESIGN.md section 4).
    scheduler.correct(page.user_id, used - page.cost);
    submit(PageTransition::completed(page.page_id, ok->output,
                                     Usage{ok->input_tokens, ok->output_tokens}, call),
           page.job_id);
    ++counters.done;
    forget(page);
    return;
  }
  if (const auto* limited = std::get_if<outcome::RateLimited>(&o.kind)) {
    ++counters.provider_429;
    pause_for(limited->retry_after.value_or(config.default_pause));
    requeue(page, call, "refusals by the provider's rate limit");
  } else if (const auto* overloaded = std::get_if<outcome::Overloaded>(&o.kind)) {
    ++counters.provider_503;
    pause_for(overloaded->retry_after.value_or(config.default_pause));
    requeue(page, call, "refusals by the provider's rate limit");
  } else if (lost != nullptr && lost->unreachable) {
    // Nothing reached the provider: its outage, not the page's fault. Every page would fail
    // the same way, so all dispatch waits and no attempt is spent.
    const std::string reason = reason_of(o.kind, o.http_status);
    pause_for_outage(reason);
    requeue(page, call, fmt::format("returns while the provider was unreachable ({})", reason));
  } else if (std::holds_alternative<outcome::ClientError>(o.kind)) {
    fail(page, call, reason_of(o.kind, o.http_status));
  } else {
    retry_or_fail(page, call, reason_of(o.kind, o.http_status));
  }
}

void Dispatcher::Impl::requeue(const QueuedPage& page, std::int64_t call,
                               std::string_view returns) {
  PageInfo& info = track(page);
  if (++info.requeues > config.max_requeues) {
    fail(page, call, fmt::format("gave up after {} {}", info.requeues, returns));
    return;
  }
  ++counters.requeued;
  submit(PageTransition::requeued(page.page_id, call), page.job_id);
  if (cancelled_jobs.contains(page.job_id)) {
    forget(page);  // the store cancels it as it comes back
    return;
  }
  scheduler.put_back(page);
}

void Dispatcher::Impl::retry_or_fail(const QueuedPage& page, std::int64_t call,
                                     const std::string& reason) {
  PageInfo& info = track(page);
  if (++info.attempts >= config.max_attempts) {
    fail(page, call, fmt::format("gave up after {} attempts: {}", info.attempts, reason));
    return;
  }
  ++counters.retried;
  // Exponential backoff with full jitter: anywhere in [0, min(max, base * 2^(n-1))).
  const Clock::duration ceiling =
      doubled(config.backoff_base, info.attempts - 1, config.backoff_max);
  const auto delay = Clock::duration(std::uniform_int_distribution<Clock::duration::rep>(
      0, std::max<Clock::duration::rep>(ceiling.count() - 1, 0))(rng));
  const WallTime not_before =
      std::chrono::system_clock::now() + std::chrono::duration_cast<WallTime::duration>(delay);
  submit(PageTransition::attempt_failed(page.page_id, reason, not_before, call), page.job_id);
  asio::co_spawn(io, hold(shared_from_this(), page, delay), report_failure);
}

awaitable<void> Dispatcher::Impl::hold(std::shared_ptr<Impl> self, QueuedPage page,
                                       Clock::duration delay) {
  const std::shared_ptr<Impl> keep = std::move(self);  // outlives the timer below
  asio::steady_timer timer(io, delay);
  hold_timers.insert(&timer);
  boost::system::error_code ignored;
  co_await timer.async_wait(asio::redirect_error(use_awaitable, ignored));
  hold_timers.erase(&timer);
  // Stopping: the page stays queued in the store, with its backoff, for the next start.
  if (dead || stopping) co_return;
  if (cancelled_jobs.contains(page.job_id)) {
    forget(page);  // the store cancelled it with its job
    co_return;
  }
  scheduler.put_back(page);
  signal();
}

awaitable<void> Dispatcher::Impl::hold_place(std::shared_ptr<Impl> self,
                                             InFlightCap::Permit permit_argument,
                                             Clock::duration delay) {
  const std::shared_ptr<Impl> keep = std::move(self);  // outlives the permit and the timer
  InFlightCap::Permit permit = std::move(permit_argument);
  asio::steady_timer timer(io, delay);
  inherited_timers.insert(&timer);
  boost::system::error_code ignored;
  co_await timer.async_wait(asio::redirect_error(use_awaitable, ignored));
  inherited_timers.erase(&timer);
  permit.release();
  if (!dead) signal();
}

Status Dispatcher::Impl::inherit_calls_out() {
  // How long a call of the dead process may still run at the provider: about as long as
  // calls took lately; twice the longest of the last ten minutes covers a provider that was
  // slowing down, and the call timeout bounds it (no history: the timeout itself).
  auto out = store.calls_out(std::chrono::minutes(10));
  if (!out.ok()) return out.status();
  Clock::duration horizon = config.call_timeout;
  if (out->longest_recent_call) {
    horizon = std::min<Clock::duration>(horizon, 2 * *out->longest_recent_call);
  }
  const WallTime wall_now = std::chrono::system_clock::now();
  for (const WallTime dispatched : out->dispatched_at) {
    const auto left = std::chrono::duration_cast<Clock::duration>(dispatched - wall_now) + horizon;
    if (left <= Clock::duration::zero()) continue;
    auto permit = budget.in_flight().try_acquire();
    if (!permit) break;  // more calls out than the cap: the cap is full already
    ++counters.calls_inherited;
    asio::co_spawn(io, hold_place(shared_from_this(), std::move(*permit), left), report_failure);
  }
  return {};
}

void Dispatcher::Impl::cancel_timers() {
  for (asio::steady_timer* timer : hold_timers) timer->cancel();
  for (asio::steady_timer* timer : inherited_timers) timer->cancel();
}

void Dispatcher::Impl::fail(const QueuedPage& page, std::int64_t call, const std::string& reason) {
  ++counters.failed;
  forget(page);
  submit(PageTransition::failed(page.page_id, reason, call), page.job_id);
}

void Dispatcher::Impl::pause_for(Clock::duration d) {
  const Clock::time_point until = clock.now() + d;
  if (!paused || *paused < until) paused = until;
}

void Dispatcher::Impl::pause_for_outage(const std::string& reason) {
  // The calls that were out when the provider went away come back unreachable one after
  // another: the first one's pause covers them all.
  if (paused && *paused > clock.now()) return;
  // One call tries again after each pause, which doubles from backoff_base to backoff_max.
  const Clock::duration pause = doubled(config.backoff_base, outage_pauses, config.backoff_max);
  ++outage_pauses;
  ++counters.outage_pauses;
  pause_for(pause);
  std::cerr << fmt::format("fairlane: {}; dispatch paused for {:.1f} s\n", reason,
                           std::chrono::duration<double>(pause).count());
}

// The buckets follow what the provider's headers say: the limits it announces (a lower
// one lowers capacity and refill, a higher one restores them, never above the configured
// ones; DESIGN.md section 3), then the budget it says is left.
void Dispatcher::Impl::sync_down(const RateLimitHeaders& limits) {
  budget.follow_announced(limits.requests.limit, limits.tokens_limit());
  if (limits.requests.remaining) budget.requests().sync_down(*limits.requests.remaining);
  if (const auto tokens = limits.tokens_remaining()) budget.tokens().sync_down(*tokens);
}

void Dispatcher::Impl::submit(PageTransition transition, JobId job, GroupCommit::Committed done) {
  commits.submit(std::move(transition), [this, job, done = std::move(done)](std::int64_t outcome) {
    if (done) done(outcome);
    if (!job_changed) return;
    try {
      job_changed(job);
    } catch (const std::exception& e) {
      std::cerr << "fairlane: a watcher of job " << job << " failed: " << e.what() << '\n';
    }
  });
  flush_when_due();
}

void Dispatcher::Impl::flush_when_due() {
  if (commits.due()) {
    commit_error = commits.flush();
    if (!commit_error.ok()) std::cerr << "fairlane: " << commit_error.message() << '\n';
  }
  const auto deadline = commits.deadline();
  if (!deadline || commit_timer_armed) return;
  commit_timer_armed = true;
  commit_timer.expires_at(*deadline);
  commit_timer.async_wait([self = shared_from_this()](boost::system::error_code) {
    self->commit_timer_armed = false;
    if (!self->dead) self->flush_when_due();
  });
}

// (The transition and the request are captured by the initiation rather than passed
// through async_initiate: GCC 12 destroys such temporaries of a co_await expression twice.)
awaitable<std::int64_t> Dispatcher::Impl::commit(PageTransition transition, JobId job) {
  auto initiate = [this, job, t = std::move(transition)](auto handler) mutable {
    auto shared = std::make_shared<decltype(handler)>(std::move(handler));
    // Resumed from the executor, never from inside the group commit's flush.
    submit(std::move(t), job, [this, shared](std::int64_t outcome) {
      asio::post(io, [shared, outcome] { (*shared)(outcome); });
    });
  };
  co_return co_await asio::async_initiate<decltype(use_awaitable), void(std::int64_t)>(
      std::move(initiate), use_awaitable);
}

awaitable<ProviderOutcome> Dispatcher::Impl::call_provider(ProviderRequest request) {
  auto initiate = [this, r = std::move(request)](auto handler) mutable {
    auto shared = std::make_shared<decltype(handler)>(std::move(handler));
    provider.call(r, [shared](ProviderOutcome o) { (*shared)(std::move(o)); });
  };
  co_return co_await asio::async_initiate<decltype(use_awaitable), void(ProviderOutcome)>(
      std::move(initiate), use_awaitable);
}

void Dispatcher::Impl::maybe_stopped() {
  if (stopping && !looping && in_flight == 0 && stopped) finish_stop();
}

void Dispatcher::Impl::finish_stop() {
  stop_timer.cancel();
  commit_timer.cancel();
  cancel_timers();
  Status status;
  if (commits.pending() > 0) {
    status = commits.flush();
    if (!status.ok()) commit_error = status;
  }
  auto done = std::exchange(stopped, {});
  if (done) done(status);
}

Dispatcher::Dispatcher(asio::io_context& io, Store& store, Provider& provider,
                       DispatcherConfig config)
    : impl_(std::make_shared<Impl>(io, store, provider, std::move(config))) {}

// Asio's cancel() throws only when the reactor itself fails: std::terminate is right then.
// NOLINTNEXTLINE(bugprone-exception-escape)
Dispatcher::~Dispatcher() {
  Impl& d = *impl_;
  d.stopping = true;
  d.stopped = {};
  d.job_changed = {};
  d.wake.cancel();
  d.commit_timer.cancel();
  d.stop_timer.cancel();
  d.cancel_timers();
  if (d.commits.pending() > 0) (void)d.commits.flush();
  d.dead = true;
  // Whatever could not be committed is dropped with the coroutines waiting on it, which
  // would otherwise keep the state alive forever; the store requeues those pages at the
  // next start.
  d.commits.abandon();
}

Status Dispatcher::start() {
  Impl& d = *impl_;
  // Before load_lanes, which turns the pages of those calls back to queued.
  if (Status inherited = d.inherit_calls_out(); !inherited.ok()) return inherited;
  auto lanes = d.store.load_lanes();
  if (!lanes.ok()) return lanes.status();
  const WallTime wall_now = std::chrono::system_clock::now();
  for (const Lane& lane : lanes.value()) {
    d.scheduler.set_weight(lane.user_id, lane.weight);
    for (const LanePage& p : lane.pages) {
      const QueuedPage page{p.page_id, p.job_id, lane.user_id, p.estimated_tokens};
      auto& info = d.track(page);
      info.attempts = p.attempts;
      if (p.attempts == 0) info.queued_at = d.clock.now();
      if (p.not_before && *p.not_before > wall_now) {
        const auto delay = std::chrono::duration_cast<Clock::duration>(*p.not_before - wall_now);
        asio::co_spawn(d.io, d.hold(impl_, page, delay), report_failure);
      } else {
        d.scheduler.add(page);
      }
    }
  }
  // The provider counted what was sent in the last minute: start the buckets without it.
  auto spend = d.store.recent_spend(std::chrono::minutes(1));
  if (!spend.ok()) return spend.status();
  const BudgetLimits& limits = d.config.limits;
  if (limits.requests_per_minute > 0) {
    d.budget.requests().sync_down(limits.requests_per_minute - spend->requests);
  }
  if (limits.tokens_per_minute > 0) {
    d.budget.tokens().sync_down(limits.tokens_per_minute - spend->tokens);
  }
  asio::co_spawn(d.io, d.loop(impl_), report_failure);
  return {};
}

void Dispatcher::add(const EnqueuedJob& job, std::int64_t weight) {
  Impl& d = *impl_;
  d.scheduler.set_weight(job.job.user_id, weight);
  for (const LanePage& p : job.pages) {
    const QueuedPage page{p.page_id, p.job_id, job.job.user_id, p.estimated_tokens};
    if (d.pages.contains(p.page_id)) continue;  // already in a lane
    d.track(page).queued_at = d.clock.now();
    d.scheduler.add(page);
  }
  d.signal();
}

Status Dispatcher::cancel(UserId user, JobId job) {
  Impl& d = *impl_;
  for (const QueuedPage& page : d.scheduler.remove_job(user, job)) d.forget(page);
  // Pages still out (in flight, or held for a backoff) are cancelled when they come back.
  if (d.job_pages.contains(job)) d.cancelled_jobs.insert(job);
  d.submit(PageTransition::job_cancelled(job), job);
  d.signal();
  // Its owner is told: committed now (fully synced, with everything queued before it in
  // the same transaction), not on the group commit's timer.
  d.commit_error = d.commits.flush();
  if (!d.commit_error.ok()) std::cerr << "fairlane: " << d.commit_error.message() << '\n';
  return d.commit_error;
}

void Dispatcher::set_weight(UserId user, std::int64_t weight) {
  impl_->scheduler.set_weight(user, weight);
}

void Dispatcher::stop(Clock::duration deadline, std::function<void(Status)> stopped) {
  Impl& d = *impl_;
  d.stopping = true;
  d.stopped = std::move(stopped);
  d.signal();
  d.stop_timer.expires_after(deadline);
  d.stop_timer.async_wait([self = impl_](boost::system::error_code error) {
    // Calls still out at the deadline are abandoned; their pages stay in flight in the store.
    if (!error && !self->dead && self->stopped) self->finish_stop();
  });
  d.cancel_timers();
  d.maybe_stopped();
}

const FairScheduler& Dispatcher::scheduler() const {
  return impl_->scheduler;
}
const Estimator& Dispatcher::estimator() const {
  return impl_->estimator;
}
const Budget& Dispatcher::budget() const {
  return impl_->budget;
}
const Door& Dispatcher::door() const {
  return impl_->door;
}
const DispatcherCounters& Dispatcher::counters() const {
  return impl_->counters;
}
std::size_t Dispatcher::in_flight() const {
  return static_cast<std::size_t>(impl_->in_flight);
}
std::size_t Dispatcher::held() const {
  return impl_->hold_timers.size();
}
std::size_t Dispatcher::inherited_in_flight() const {
  return impl_->inherited_timers.size();
}
std::size_t Dispatcher::tracked_pages() const {
  return impl_->pages.size();
}
std::size_t Dispatcher::cancelled_jobs() const {
  return impl_->cancelled_jobs.size();
}
const Status& Dispatcher::store_error() const {
  return impl_->commit_error;
}
std::optional<Clock::time_point> Dispatcher::paused_until() const {
  return impl_->paused;
}

void Dispatcher::on_job_changed(JobChanged callback) {
  impl_->job_changed = std::move(callback);
}

}  // namespace fairlane::service
