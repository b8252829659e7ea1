#include "service/dispatcher.hpp"

#include "fairlane/core/promise_order.hpp"
#include "fairlane/store/cluster.hpp"
#include "provider/listen.hpp"
#include "service/commit_thread.hpp"
#include "service/store_readers.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio.hpp>
#include <cassert>
#include <condition_variable>
#include <functional>
#include <iostream>
#include <mutex>
#include <optional>
#include <queue>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

namespace fairlane::service {
namespace {

namespace asio = boost::asio;
using asio::awaitable;

std::vector<std::unique_ptr<Store>> one_store(std::unique_ptr<Store> store) {
  std::vector<std::unique_ptr<Store>> stores;
  stores.push_back(std::move(store));
  return stores;
}
using asio::use_awaitable;

// How long before `now` a job read from the store was created, on the loop's clock.
Clock::duration ago(WallTime now, WallTime t) {
  return std::chrono::duration_cast<Clock::duration>(now - t);
}

// Reports, rather than swallows, an exception that ends a coroutine.
constexpr ReportFailure report_failure{"fairlane: the dispatcher failed"};

EstimatorConfig estimator_config(const DispatcherConfig& config) {
  EstimatorConfig c = config.estimator;
  c.limits = config.limits;
  return c;
}

DispatchPolicyConfig policy_config(const DispatcherConfig& config) {
  return DispatchPolicyConfig{.max_attempts = config.max_attempts,
                              .max_requeues = config.max_requeues,
                              .backoff_base = config.backoff_base,
                              .backoff_max = config.backoff_max,
                              .default_pause = config.default_pause,
                              .call_timeout = config.call_timeout,
                              .seed = config.seed};
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
          if (o.status / 100 == 2) return o.detail;  // the model declined the page
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

// The provider's outcome in the policy's terms: what happened to the call, not how the
// provider said it. `latency`: from the page leaving its lane to its answer, which is what
// a page's end waits for (its dispatch's commit and its text's read as well as the call).
CallOutcome core_outcome(const ProviderOutcome& o, Clock::duration latency) {
  const auto end = [&o]() -> CallEnd {
    if (const auto* ok = std::get_if<outcome::Ok>(&o.kind)) {
      return call::Answered{ok->input_tokens, ok->output_tokens};
    }
    if (const auto* limited = std::get_if<outcome::RateLimited>(&o.kind)) {
      return call::RateLimited{limited->retry_after};
    }
    if (const auto* overloaded = std::get_if<outcome::Overloaded>(&o.kind)) {
      return call::Overloaded{overloaded->retry_after};
    }
    std::string reason = reason_of(o.kind, o.http_status);
    if (const auto* lost = std::get_if<outcome::ConnectionError>(&o.kind);
        lost && lost->unreachable) {
      return call::Unreachable{std::move(reason)};
    }
    if (const auto* refused = std::get_if<outcome::ClientError>(&o.kind)) {
      // A refusal of fairlane itself (provider::classify): every page would meet it.
      if (!refused->remedy.empty()) {
        return call::Rejected{fmt::format("{}: {}", reason, refused->remedy)};
      }
      return call::ClientError{std::move(reason), refused->used_tokens};
    }
    if (std::holds_alternative<outcome::BadResponse>(o.kind) && o.http_status / 100 == 2) {
      return call::Unreadable{std::move(reason)};
    }
    return call::TransientError{std::move(reason)};
  };
  // What the headers said of the provider's budgets, for the policy's buckets to follow.
  const Announced announced{o.limits.requests.limit, o.limits.tokens_limit(),
                            o.limits.requests.remaining, o.limits.tokens_remaining()};
  return CallOutcome{end(), latency, announced};
}

}  // namespace

// A group-commit batch out on the CommitThread, and its answer once committed.
struct BatchOut {
  std::vector<PageTransition> batch;
  std::mutex mutex;
  std::condition_variable answered;
  std::optional<Result<std::vector<std::int64_t>>> answer;  // under mutex
};

struct Dispatcher::Impl : std::enable_shared_from_this<Impl> {
  Impl(asio::io_context& context, Store& s, Provider& p, DispatcherConfig c,
       CommitThread* commit_thread, StoreReaders* pages_reader)
      : io(context),
        store(s),
        committer(commit_thread),
        page_reader(pages_reader),
        provider(p),
        config(std::move(c)),
        budget(clock, config.limits),
        scheduler(config.quantum),
        estimator(scheduler, estimator_config(config), &budget, &clock),
        order(scheduler, estimator, clock, config.order),
        door(scheduler, estimator, door_config(config)),
        policy(clock, wall_clock, budget, order, estimator, policy_config(config)),
        commits(store, clock, config.commits),
        wake(context),
        commit_timer(context),
        stop_timer(context) {}

  asio::io_context& io;
  Store& store;
  CommitThread* committer;    // null: batches commit on the io thread, with `store`
  StoreReaders* page_reader;  // null: a page's text is read on the io thread, from `store`
  Provider& provider;
  const DispatcherConfig config;
  SteadyClock clock;
  SystemWallClock wall_clock;
  Budget budget;
  FairScheduler scheduler;
  Estimator estimator;
  PromiseOrder order;  // fair order that keeps the door's promises against newer work
  Door door;
  DispatchPolicy policy;  // every decision of the loop; this adapter carries them out
  GroupCommit commits;
  asio::steady_timer wake;  // the loop sleeps on it; signal() cuts the sleep short
  asio::steady_timer commit_timer;
  bool commit_timer_armed = false;
  std::shared_ptr<BatchOut> batch_out;  // the batch on the CommitThread, until settled
  asio::steady_timer stop_timer;

  // Places under the in-flight cap held for a previous process's calls, until they end.
  std::unordered_set<asio::steady_timer*> inherited_timers;
  // Places held for a previous process's calls, from inherit_calls_out() (at once, not once
  // their coroutines have started) until each is given back.
  std::size_t places_held = 0;
  Status commit_error;   // the last flush's failure, ok after a flush that went through
  bool dead = false;     // the Dispatcher is gone: touch neither the store nor the provider
  bool leading = false;  // the loop was started (start, lead); a follower's view has none
  bool looping = false;
  bool stopping = false;
  std::function<void(Status)> stopped;
  DispatcherCounters counters;
  JobChanged job_changed;
  Deposed deposed;
  bool deposed_told = false;
  std::vector<JobView> restored_promises;  // start()'s promised jobs

  void signal() { wake.cancel(); }

  // Loads the lanes and starts: as a leader (the lanes as load_lanes() leaves them, the
  // loop running) or as a follower's view (ClusterStore::lanes_view(), no loop).
  Status begin(bool lead);
  // Stops at once: nothing more is sent or committed; calls still out are abandoned (their
  // pages stay in flight in the store, for the next start or the next leader).
  void kill();
  // After a flush: keeps its outcome, says so, and tells the owner once if it was fenced.
  void note_flush(Status status);

  // The door's promise of a job, if it made one, from the wall clock to the loop's.
  void promise(const JobView& job) {
    if (!job.promised_eta_at) return;
    policy.promise(job.user_id, job.id,
                   clock.now() + std::chrono::duration_cast<Clock::duration>(*job.promised_eta_at -
                                                                             wall_clock.now()));
  }
  // At start: the estimator learns what the last calls cost and took (recent_calls).
  Status warm_estimator();
  // What arrived, from the jobs the store kept (recent_jobs). At the first start of this
  // Dispatcher's estimators, the last arrivals window: a restart's first promises expect the
  // work the process before was seeing arrive. At each start after (a follower's view read
  // again, a takeover), the jobs created since the read before that are not counted yet,
  // whether they wait in the lanes or have been sent already: a follower hears of no job
  // as it comes, as the leader does in add().
  Status count_arrivals();
  // Carried on to the estimators built again after this one: when the store was last read
  // for arrivals (none: never), and the jobs counted as arrived since a little before that,
  // with when they were created (or heard of, in add()).
  std::optional<WallTime> arrivals_read_at;
  std::unordered_map<JobId, WallTime> counted_arrivals;
  // The first read: each job of the window as arrived when it was created.
  void count_window(const RecentJobs& recent, WallTime now);
  // Counts a job read from the store as arrived `ago`, behind `ahead` pages of its user's,
  // unless it was already.
  void count_arrival(const ArrivedJob& job, Clock::duration ago, std::int64_t ahead);
  // A leader, which reads no more, forgets the jobs older than the arrivals window now and
  // then (when twice as many are kept as the time before).
  void forget_old_arrivals();
  std::size_t forget_arrivals_at = 0;
  // At start: the restored jobs that were promised a finish keep their promises, in the
  // order and (restored_promises) for the Router's Promises. One read of the store a job.
  Status restore_promises(const std::vector<Lane>& lanes);

  awaitable<void> sleep_until(Clock::time_point t) {
    wake.expires_at(t);
    boost::system::error_code ignored;
    co_await wake.async_wait(asio::redirect_error(use_awaitable, ignored));
  }

  awaitable<void> loop(std::shared_ptr<Impl> self);
  awaitable<void> run_call(std::shared_ptr<Impl> self, QueuedPage page, Lease lease);
  // Holds `permit` for `delay` (a call of a previous process, still at the provider).
  // A place held for a call of a previous process: the state, and the permit, which goes
  // first (members go in reverse order). As two parameters, a coroutine destroyed before it
  // started (its io_context destroyed unrun, after a start that failed) released the state
  // first, and the permit then returned itself to a cap already freed: GCC 12 destroys an
  // unstarted coroutine's parameter copies first to last.
  struct HeldPlace {
    std::shared_ptr<Impl> keep;
    InFlightCap::Permit permit;
  };
  // Holds the place for `delay` (a call of a previous process, still at the provider).
  awaitable<void> hold_place(HeldPlace place, Clock::duration delay);
  // At start: a place for each call still out, until it could have ended.
  Status inherit_calls_out();
  // Lets go of the pages held back for a backoff and of the inherited places.
  void cancel_timers();

  // Submits a transition to the group commit; `done` (and the job's watchers) hear of it
  // once it has committed.
  void submit(PageTransition transition, JobId job, GroupCommit::Committed done = {});
  // Tells whoever watches `job` that it changed.
  void changed(JobId job) const;
  void flush_when_due();
  // Hands the queued batch to the CommitThread; settle() takes its answer on the io thread.
  void commit_elsewhere();
  void settle(std::shared_ptr<BatchOut> out);  // by value: often batch_out itself
  // Commits everything queued now, after the batch out (waited for): for cancel() and stops.
  Status flush_now();
  awaitable<std::int64_t> commit(PageTransition transition, JobId job);
  awaitable<ProviderOutcome> call_provider(ProviderRequest request);

  // `taken`: when the page left its lane.
  void handle(const QueuedPage& page, std::int64_t call, Lease& lease, const ProviderOutcome& o,
              Clock::time_point taken);
  // Counts the policy's verdict on a call and commits its transition; `answer` is the
  // provider's, for a Complete.
  void record(const QueuedPage& page, std::int64_t call, const CallVerdict& verdict,
              const outcome::Ok* answer = nullptr);
  void fail(const QueuedPage& page, std::int64_t call, const std::string& reason);
  void maybe_stopped();
  void finish_stop();
};

awaitable<void> Dispatcher::Impl::loop(std::shared_ptr<Impl> self) {
  looping = true;
  while (!stopping) {
    DispatchStep next = policy.next_step();
    if (auto* send = std::get_if<step::Send>(&next)) {
      asio::co_spawn(io, run_call(self, send->page, std::move(send->lease)), report_failure);
      continue;
    }
    if (const auto* too_large = std::get_if<step::FailPage>(&next)) {
      fail(too_large->page, 0, too_large->reason);
      continue;
    }
    // A wait: to the exact time the policy names, or until signal() (a call's end, new
    // work, a cancellation) cuts it short.
    co_await sleep_until(wake_time(next).value_or(Clock::time_point::max()));
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
  const Clock::time_point taken = clock.now();
  PageTransition dispatched = PageTransition::dispatched(page.page_id, page.cost);
  const std::int64_t call = co_await commit(std::move(dispatched), page.job_id);
  if (dead) co_return;
  const auto end = [this] {
    signal();
    maybe_stopped();
  };
  if (call == 0) {
    // The page is no longer queued in the store (its job was cancelled meanwhile).
    policy.withdrawn(page, lease);
    end();
    co_return;
  }
  // Its text (or image), on a connection of its own where there is one (a server database's).
  Result<PageCall> page_call = Status(StatusCode::internal, "not read");
  if (page_reader != nullptr) {
    co_await read_on(*page_reader,
                     [&](Store& pages) { page_call = pages.page_call(page.page_id); });
    if (dead) co_return;
  } else {
    page_call = store.page_call(page.page_id);
  }
  if (stopping || !policy.may_call()) {
    // A 429 or a stop came while this dispatch was being committed: the call has not been
    // made, so the page goes back without spending anything but the request.
    policy.not_called(page, lease, !stopping);
    submit(PageTransition::requeued(page.page_id, call), page.job_id);
    end();
    co_return;
  }
  ++counters.dispatched;
  if (const auto waited = policy.first_call_wait(page.page_id)) {
    counters.queue_wait_seconds.observe(std::chrono::duration<double>(*waited).count());
  }
  if (!page_call.ok()) {
    const std::string reason =
        fmt::format("its text could not be read: {}", page_call.status().message());
    // A lock, or a database server out of reach, is the store's and passes: no attempt of
    // the page's. SQLite's io_error is the disk under the file, which may be this page's.
    const StatusCode code = page_call.status().code();
    const bool passing =
        code == StatusCode::busy || (code == StatusCode::io_error && store.cluster() != nullptr);
    record(page, call,
           passing ? policy.could_not_read(page, lease, reason)
                   : policy.could_not_call(page, lease, reason));
    end();
    co_return;
  }
  PageCall what = std::move(page_call).value();
  ProviderRequest request{config.prompt, std::move(what.text), config.model, what.max_tokens,
                          std::move(what.image)};
  const ProviderOutcome outcome = co_await call_provider(std::move(request));
  if (dead) co_return;
  handle(page, call, lease, outcome, taken);
  end();
}

void Dispatcher::Impl::handle(const QueuedPage& page, std::int64_t call, Lease& lease,
                              const ProviderOutcome& o, Clock::time_point taken) {
  ++counters.outcomes[std::string(outcome_name(o.kind))];
  counters.call_latency_seconds.observe(std::chrono::duration<double>(o.latency).count());
  if (std::holds_alternative<outcome::RateLimited>(o.kind)) ++counters.provider_429;
  if (std::holds_alternative<outcome::Overloaded>(o.kind)) ++counters.provider_503;
  // The policy settles (or cancels) the lease, then has the buckets follow what the
  // provider's headers announced.
  const CallOutcome core = core_outcome(o, clock.now() - taken);
  const CallVerdict verdict = policy.on_outcome(page, lease, core);
  if (verdict.outage_pause) {
    ++counters.outage_pauses;
    const auto* rejected = std::get_if<call::Rejected>(&core.end);
    std::cerr << fmt::format(
        "fairlane: {}; dispatch paused for {:.3g} s\n",
        rejected != nullptr ? rejected->reason : reason_of(o.kind, o.http_status),
        std::chrono::duration<double>(*verdict.outage_pause).count());
  }
  record(page, call, verdict, std::get_if<outcome::Ok>(&o.kind));
}

void Dispatcher::Impl::record(const QueuedPage& page, std::int64_t call, const CallVerdict& verdict,
                              const outcome::Ok* answer) {
  std::visit(
      [&](const auto& action) {
        using T = std::decay_t<decltype(action)>;
        if constexpr (std::is_same_v<T, verdict::Complete>) {
          assert(answer != nullptr && "only an answer completes a page");
          ++counters.done;
          submit(
              PageTransition::completed(page.page_id, answer->output,
                                        Usage{answer->input_tokens, answer->output_tokens}, call),
              page.job_id);
        } else if constexpr (std::is_same_v<T, verdict::Requeue>) {
          ++counters.requeued;
          submit(PageTransition::requeued(page.page_id, call), page.job_id);
        } else if constexpr (std::is_same_v<T, verdict::Retry>) {
          ++counters.retried;
          submit(
              PageTransition::attempt_failed(page.page_id, action.reason, action.not_before, call),
              page.job_id);
        } else {
          fail(page, call, action.reason);
        }
      },
      verdict.action);
}

awaitable<void> Dispatcher::Impl::hold_place(HeldPlace place, Clock::duration delay) {
  HeldPlace held = std::move(place);  // the state outlives the permit and the timer
  asio::steady_timer timer(io, delay);
  inherited_timers.insert(&timer);
  boost::system::error_code ignored;
  co_await timer.async_wait(asio::redirect_error(use_awaitable, ignored));
  inherited_timers.erase(&timer);
  held.permit.release();
  --places_held;
  if (!dead) signal();
}

Status Dispatcher::Impl::inherit_calls_out() {
  // Calls of the last ten minutes, or of the call timeout if longer: none can be out longer.
  const auto window = std::max<std::chrono::milliseconds>(
      std::chrono::minutes(10), std::chrono::ceil<std::chrono::milliseconds>(config.call_timeout));
  auto out = store.calls_out(window);
  if (!out.ok()) return out.status();
  std::optional<Clock::duration> longest;
  if (out->longest_recent_call) longest = *out->longest_recent_call;
  for (InheritedCall& held : policy.inherit_calls_out(out->dispatched_at, longest)) {
    ++counters.calls_inherited;
    ++places_held;
    asio::co_spawn(io, hold_place(HeldPlace{shared_from_this(), std::move(held.permit)}, held.left),
                   report_failure);
  }
  return {};
}

void Dispatcher::Impl::cancel_timers() {
  policy.drop_held();
  for (asio::steady_timer* timer : inherited_timers) timer->cancel();
}

void Dispatcher::Impl::fail(const QueuedPage& page, std::int64_t call, const std::string& reason) {
  ++counters.failed;
  submit(PageTransition::failed(page.page_id, reason, call), page.job_id);
}

void Dispatcher::Impl::submit(PageTransition transition, JobId job, GroupCommit::Committed done) {
  commits.submit(std::move(transition), [this, job, done = std::move(done)](std::int64_t outcome) {
    if (done) done(outcome);
    changed(job);
  });
  flush_when_due();
}

void Dispatcher::Impl::changed(JobId job) const {
  if (!job_changed) return;
  try {
    job_changed(job);
  } catch (const std::exception& e) {
    std::cerr << "fairlane: a watcher of job " << job << " failed: " << e.what() << '\n';
  }
}

void Dispatcher::Impl::note_flush(Status status) {
  counters.store_refused = commits.refused();
  commit_error = std::move(status);
  if (commit_error.ok()) return;
  std::cerr << "fairlane: " << commit_error.message() << '\n';
  if (!ends_leading(commit_error) || deposed_told || !deposed) return;
  // Another instance leads, or what the store holds is not known any more: told from the
  // executor, since the owner replaces this state.
  deposed_told = true;
  // The reason as it is now: a later flush may change commit_error before this runs.
  asio::post(io, [self = shared_from_this(), why = commit_error] {
    if (self->dead || !self->deposed) return;
    // A copy: the owner replaces this state (and its callback) from inside the call.
    const Deposed told = self->deposed;
    told(why);
  });
}

void Dispatcher::Impl::flush_when_due() {
  if (commits.due()) {
    if (committer != nullptr) {
      commit_elsewhere();
    } else {
      note_flush(commits.flush());
    }
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

void Dispatcher::Impl::commit_elsewhere() {
  auto out = std::make_shared<BatchOut>();
  out->batch = commits.begin_flush();
  batch_out = out;
  // The task holds no share of this state: its last owner must go on the io thread.
  committer->post([out, &context = io, weak = weak_from_this()](Store& commit_store) {
    auto answer = commit_store.apply(out->batch);
    {
      const std::lock_guard lock(out->mutex);
      out->answer = std::move(answer);
    }
    out->answered.notify_all();
    asio::post(context, [out, weak] {
      const auto self = weak.lock();
      if (self && !self->dead) self->settle(out);
    });
  });
}

// `out` is a copy: the caller often passes batch_out itself, which this resets.
// NOLINTNEXTLINE(performance-unnecessary-value-param)
void Dispatcher::Impl::settle(std::shared_ptr<BatchOut> out) {
  if (batch_out != out) return;  // settled already, by a flush that waited for it
  batch_out.reset();
  std::unique_lock lock(out->mutex);
  out->answered.wait(lock, [&] { return out->answer.has_value(); });
  Result<std::vector<std::int64_t>> answer = std::move(*out->answer);
  lock.unlock();
  note_flush(commits.end_flush(std::move(out->batch), std::move(answer)));
  flush_when_due();
}

Status Dispatcher::Impl::flush_now() {
  // After a batch that ended this leading nothing more is sent: it would go out again (a
  // batch whose outcome is unknown is back in the queue) from an instance that no longer
  // leads, and its changes that did commit would come back as "no longer applied".
  if (ends_leading(commit_error)) return commit_error;
  if (committer == nullptr) return commits.flush();
  // Settling may hand over the next batch (a callback submits, a batch is due): wait again.
  while (batch_out) settle(batch_out);
  if (ends_leading(commit_error) || commits.pending() == 0) return commit_error;
  std::vector<PageTransition> batch = commits.begin_flush();
  Result<std::vector<std::int64_t>> answer =
      Status{StatusCode::internal, "the commit thread did not answer"};
  committer->run([&](Store& commit_store) { answer = commit_store.apply(batch); });
  return commits.end_flush(std::move(batch), std::move(answer));
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
  if (stopping && !looping && policy.calls_out() == 0 && stopped) finish_stop();
}

void Dispatcher::Impl::finish_stop() {
  stop_timer.cancel();
  commit_timer.cancel();
  cancel_timers();
  Status status;
  if (commits.pending() > 0 || batch_out) {
    status = flush_now();
    if (!status.ok()) commit_error = status;
  }
  auto done = std::exchange(stopped, {});
  if (done) done(status);
}

Dispatcher::Dispatcher(asio::io_context& io, Store& store, Provider& provider,
                       DispatcherConfig config, std::unique_ptr<Store> commit_store,
                       std::unique_ptr<Store> page_store)
    : committer_(commit_store ? std::make_unique<CommitThread>(std::move(commit_store)) : nullptr),
      page_reader_(page_store ? std::make_unique<StoreReaders>(one_store(std::move(page_store)))
                              : nullptr),
      impl_(std::make_shared<Impl>(io, store, provider, std::move(config), committer_.get(),
                                   page_reader_.get())) {}

// Asio's cancel() throws only when the reactor itself fails: std::terminate is right then.
// NOLINTNEXTLINE(bugprone-exception-escape)
Dispatcher::~Dispatcher() {
  impl_->kill();
}

void Dispatcher::Impl::kill() {
  stopping = true;
  stopped = {};
  job_changed = {};
  deposed = {};
  wake.cancel();
  commit_timer.cancel();
  stop_timer.cancel();
  cancel_timers();
  // The batch out commits (or not) before anything after this state touches the store.
  while (batch_out) settle(batch_out);
  if (commits.pending() > 0 && !ends_leading(commit_error)) (void)flush_now();
  dead = true;
  // Whatever could not be committed is dropped with the coroutines waiting on it, which
  // would otherwise keep the state alive forever; the store requeues those pages at the
  // next start.
  commits.abandon();
}

Status Dispatcher::Impl::restore_promises(const std::vector<Lane>& lanes) {
  // One read for them all: on PostgreSQL a read is a round trip, and a takeover waits.
  std::vector<JobId> queued;
  for (const Lane& lane : lanes) {
    for (const LanePage& p : lane.pages) queued.push_back(p.job_id);
  }
  std::sort(queued.begin(), queued.end());
  queued.erase(std::unique(queued.begin(), queued.end()), queued.end());
  auto jobs = store.jobs(queued);
  if (!jobs.ok()) return jobs.status();
  for (JobView& job : jobs.value()) {
    if (!job.promised_eta_at || is_terminal(job.state)) continue;
    promise(job);
    restored_promises.push_back(std::move(job));
  }
  return {};
}

// The last calls the estimator starts from: five times its slowest memory (the latency's,
// alpha 0.02, about 50 calls).
constexpr std::size_t kWarmCalls = 256;

Status Dispatcher::Impl::warm_estimator() {
  auto calls = store.recent_calls(kWarmCalls);
  if (!calls.ok()) return calls.status();
  for (const EndedCall& call : calls.value()) {
    estimator.record_settled(call.tokens, call.reserved_tokens, call.latency);
  }
  return {};
}

// The jobs a read counts as arrived lately: at most the newest so many of the window.
constexpr std::size_t kArrivedJobs = 16'384;
// How far before the last read a read looks again: a job's created_at is taken before its
// upload commits, so a job may show in the store a little after a read that it predates.
constexpr WallTime::duration kReadAgainFrom = std::chrono::seconds(10);

void Dispatcher::Impl::count_arrival(const ArrivedJob& job, Clock::duration ago,
                                     std::int64_t ahead) {
  if (!counted_arrivals.emplace(job.id, job.created_at).second) return;
  estimator.record_arrived(ago, job.user_id, job.pages, ahead);
}

void Dispatcher::Impl::forget_old_arrivals() {
  if (counted_arrivals.size() <= std::max(forget_arrivals_at, kArrivedJobs)) return;
  const WallTime oldest = wall_clock.now() - std::chrono::duration_cast<WallTime::duration>(
                                                 config.estimator.arrival_window);
  std::erase_if(counted_arrivals, [oldest](const auto& job) { return job.second < oldest; });
  forget_arrivals_at = 2 * counted_arrivals.size();
}

Status Dispatcher::Impl::count_arrivals() {
  const WallTime now = wall_clock.now();
  const auto window =
      std::chrono::duration_cast<WallTime::duration>(config.estimator.arrival_window);
  const std::optional<WallTime> read_before = arrivals_read_at;
  const WallTime since =
      read_before ? std::max(*read_before - kReadAgainFrom, now - window) : now - window;
  auto recent = store.recent_jobs(since, kArrivedJobs);
  if (!recent.ok()) return recent.status();
  arrivals_read_at = now;
  // What was counted before `since` cannot be read again.
  std::erase_if(counted_arrivals, [since](const auto& job) { return job.second <= since; });
  if (!read_before) {
    count_window(recent.value(), now);
    return {};
  }
  // Each job joined its lane behind its user's pages that are still ahead of it in this view,
  // or none if it has left the lanes (sent, or cancelled).
  for (const ArrivedJob& job : recent->jobs) {
    const auto place = scheduler.job_place(job.user_id, job.id);
    count_arrival(job, ago(now, job.created_at), place ? place->next_index - 1 : 0);
  }
  return {};
}

void Dispatcher::Impl::count_window(const RecentJobs& recent, WallTime now) {
  // No job in the window: nothing says the service was taking uploads lately (a new store, or
  // one back from a long stop), so the arrivals start from none and their warm-up measures.
  if (recent.jobs.empty() || !recent.first_job_at) return;
  estimator.arrivals_counted_for(
      std::min(config.estimator.arrival_window, ago(now, *recent.first_job_at)));
  // Each job joined its lane behind its user's earlier jobs of the window that had not ended
  // when it came (all their pages: how far they had gone is not kept).
  struct Unfinished {
    WallTime finished;
    std::int64_t pages;
    bool operator>(const Unfinished& other) const { return finished > other.finished; }
  };
  struct UserLane {
    std::priority_queue<Unfinished, std::vector<Unfinished>, std::greater<>> open;
    std::int64_t pages = 0;
  };
  std::unordered_map<UserId, UserLane> lanes;
  for (const ArrivedJob& job : recent.jobs) {
    UserLane& lane = lanes[job.user_id];
    while (!lane.open.empty() && lane.open.top().finished <= job.created_at) {
      lane.pages -= lane.open.top().pages;
      lane.open.pop();
    }
    count_arrival(job, ago(now, job.created_at), lane.pages);
    lane.open.push(Unfinished{job.finished_at.value_or(WallTime::max()), job.pages});
    lane.pages += job.pages;
  }
}

Status Dispatcher::Impl::begin(bool lead) {
  if (Status inherited = inherit_calls_out(); !inherited.ok()) return inherited;
  // A fresh estimator (a restart, a takeover, a follower's view read again, which never sees
  // a call end) starts from what the provider did lately, as the buckets do below.
  if (Status warmed = warm_estimator(); !warmed.ok()) return warmed;
  ClusterStore* cluster = store.cluster();
  if (!lead && cluster == nullptr) {
    return Status{StatusCode::internal, "only a cluster's store has a follower's view"};
  }
  auto lanes = lead ? store.load_lanes() : cluster->lanes_view();
  if (!lanes.ok()) return lanes.status();
  for (const Lane& lane : lanes.value()) {
    scheduler.set_weight(lane.user_id, lane.weight);
    for (const LanePage& p : lane.pages) {
      // Into its lane, or held back while its backoff still runs; a page added before the
      // start (Dispatcher::add) is not restored twice.
      (void)policy.restore(QueuedPage{p.page_id, p.job_id, lane.user_id, p.estimated_tokens},
                           p.attempts, p.not_before);
    }
  }
  // After the lanes, whose users' weights set their rounds and which hold the jobs' places.
  if (Status counted = count_arrivals(); !counted.ok()) return counted;
  // A follower's view is rebuilt every second or so: its promises are the leader's to keep.
  if (lead) {
    if (Status promised = restore_promises(lanes.value()); !promised.ok()) return promised;
  }
  // The provider counted what was sent in the last minute: start the buckets without it.
  auto spend = store.recent_spend(std::chrono::minutes(1));
  if (!spend.ok()) return spend.status();
  const BudgetLimits& limits = config.limits;
  if (limits.requests_per_minute > 0) {
    budget.requests().sync_down(limits.requests_per_minute - spend->requests);
  }
  if (limits.tokens_per_minute > 0) {
    budget.tokens().sync_down(limits.tokens_per_minute - spend->tokens);
  }
  if (lead) {
    leading = true;
    asio::co_spawn(io, loop(shared_from_this()), report_failure);
  }
  return {};
}

Status Dispatcher::start() {
  return impl_->begin(true);
}

void Dispatcher::replace() {
  Impl& old = *impl_;
  auto fresh = std::make_shared<Impl>(old.io, old.store, old.provider, old.config, old.committer,
                                      old.page_reader);
  fresh->counters = old.counters;
  // What arrived lately is not in the store's lanes, which show what waits: keep counting it.
  fresh->estimator.continue_arrivals(old.estimator);
  fresh->arrivals_read_at = old.arrivals_read_at;
  fresh->counted_arrivals = std::move(old.counted_arrivals);
  fresh->forget_arrivals_at = old.forget_arrivals_at;
  fresh->job_changed = std::move(old.job_changed);
  fresh->deposed = std::move(old.deposed);
  // A stop under way ends with the dispatch it was waiting for: what is still out is the
  // next leader's to requeue, as after the stop's deadline. Told after this returns: its
  // callback may stop what called this (Leadership).
  auto stopped = std::exchange(old.stopped, {});
  old.kill();
  impl_ = std::move(fresh);
  if (stopped) asio::post(impl_->io, [stopped = std::move(stopped)] { stopped(Status{}); });
}

Status Dispatcher::follow() {
  replace();
  return impl_->begin(false);
}

Status Dispatcher::lead(std::string_view instance, std::int64_t epoch) {
  ClusterStore* cluster = impl_->store.cluster();
  if (cluster == nullptr) {
    return Status{StatusCode::internal, "only a cluster's store has a leader to fence"};
  }
  if (stop_asked_) {
    return Status{StatusCode::fenced, "this instance is stopping: it does not lead again"};
  }
  replace();
  cluster->fence(instance, epoch);
  if (committer_) {
    committer_->run([&](Store& commit_store) {
      if (ClusterStore* own = commit_store.cluster()) own->fence(instance, epoch);
    });
  }
  return impl_->begin(true);
}

bool Dispatcher::dispatching() const {
  return impl_->leading && !impl_->stopping;  // kill() stops too
}

void Dispatcher::on_deposed(Deposed callback) {
  impl_->deposed = std::move(callback);
}

bool Dispatcher::add(const EnqueuedJob& job, std::int64_t weight) {
  Impl& d = *impl_;
  d.scheduler.set_weight(job.job.user_id, weight);
  std::vector<QueuedPage> pages;
  pages.reserve(job.pages.size());
  for (const LanePage& p : job.pages) {
    pages.push_back(QueuedPage{p.page_id, p.job_id, job.job.user_id, p.estimated_tokens});
  }
  // A job heard of twice (its upload here, then the store's notification) arrives once, as
  // does one a read of the store counted already (count_arrivals). Only a cluster's
  // dispatcher reads again (a view, a takeover); a single instance keeps no ids.
  const bool cluster = d.store.cluster() != nullptr;
  const bool counted = cluster && d.counted_arrivals.contains(job.job.id);
  if (d.policy.enqueue_job(pages, !counted) == 0 && !job.pages.empty()) return false;
  if (cluster && !counted) {
    d.counted_arrivals.emplace(job.job.id, d.wall_clock.now());
    d.forget_old_arrivals();
  }
  d.promise(job.job);
  d.signal();
  return true;
}

Status Dispatcher::cancel(UserId user, JobId job) {
  Impl& d = *impl_;
  auto committed = std::make_shared<bool>(false);
  d.submit(PageTransition::job_cancelled(job), job,
           [committed](std::int64_t) { *committed = true; });
  // Its owner is told: committed now (fully synced, with everything queued before it in
  // the same transaction, after the batch out), not on the group commit's timer. While a
  // batch the store refused is taken apart, a flush commits only its first change (or
  // replaces or drops it, and says so): flushed again until the cancellation's own has
  // committed, or a flush fails for another reason. Each round moves the queue on. Nothing
  // here lets the dispatch loop run, so no page of the job leaves its lane meanwhile.
  Status flushed;
  do {
    flushed = d.flush_now();
    d.note_flush(flushed);
  } while (!*committed && d.commits.pending() > 0 &&
           (flushed.ok() || GroupCommit::refused_for_content(flushed.code())));
  // Told, and the flush failed: the store refused the cancellation and it was dropped. The
  // store holds the job as it was, so its pages stay in their lanes: taken out, they would
  // be dispatched and ended by no one until a restart read them again.
  if (*committed && !flushed.ok()) {
    // The service's fault, not the caller's (500, not 400).
    return Status{StatusCode::internal,
                  fmt::format("job {} was not cancelled and goes on: the job store refused the "
                              "cancellation ({}: {}). Tell the service's operator.",
                              job, to_string(flushed.code()), flushed.message())};
  }
  // Committed, or still queued to commit (a flush that failed for a passing reason is
  // retried): pages still out (in flight, or held for a backoff) are cancelled when they
  // come back.
  (void)d.policy.cancel_job(user, job);
  d.signal();
  if (*committed || !flushed.ok()) return flushed.ok() ? Status{} : flushed;
  return Status{
      StatusCode::internal,
      fmt::format("cancelling job {}: its change was neither committed nor refused", job)};
}

std::size_t Dispatcher::cancelled_elsewhere(UserId user, JobId job) {
  Impl& d = *impl_;
  const std::size_t left = d.policy.cancel_job(user, job).size();
  d.signal();
  d.changed(job);
  return left;
}

bool Dispatcher::tracks_job(JobId job) const {
  return impl_->policy.tracks_job(job);
}

void Dispatcher::promise(const JobView& job) {
  impl_->promise(job);
}

void Dispatcher::set_weight(UserId user, std::int64_t weight) {
  impl_->scheduler.set_weight(user, weight);
}

void Dispatcher::stop(Clock::duration deadline, std::function<void(Status)> stopped) {
  stop_asked_ = true;
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
const std::vector<JobView>& Dispatcher::restored_promises() const {
  return impl_->restored_promises;
}

const Estimator& Dispatcher::estimator() const {
  return impl_->estimator;
}
const PageOrder& Dispatcher::order() const {
  return impl_->order;
}
std::int64_t Dispatcher::out_of_turn() const {
  return impl_->order.out_of_turn();
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
  return static_cast<std::size_t>(impl_->policy.calls_out());
}
std::size_t Dispatcher::held() const {
  return impl_->policy.held();
}
std::size_t Dispatcher::inherited_in_flight() const {
  return impl_->places_held;
}
std::size_t Dispatcher::tracked_pages() const {
  return impl_->policy.tracked_pages();
}
std::size_t Dispatcher::cancelled_jobs() const {
  return impl_->policy.cancelled_jobs();
}
const Status& Dispatcher::store_error() const {
  return impl_->commit_error;
}
std::optional<Clock::time_point> Dispatcher::paused_until() const {
  return impl_->policy.paused_until();
}
const DispatchPolicy& Dispatcher::policy() const {
  return impl_->policy;
}

void Dispatcher::on_job_changed(JobChanged callback) {
  impl_->job_changed = std::move(callback);
}

}  // namespace fairlane::service
