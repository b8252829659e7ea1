// Dispatcher: fairlane's dispatch loop on the io_context, the Asio adapter of the core's
// DispatchPolicy (include/fairlane/core/dispatch_policy.hpp), which makes every decision:
// what goes next, and what a call's outcome does to its lease, its lane, the pauses and the
// page. The Dispatcher owns the core (Budget, FairScheduler, Estimator, Door, the policy)
// and carries the decisions out:
//
//   policy.next_step() -> Send: mark dispatched (group commit; the call goes out once that
//   committed) -> provider call -> policy.on_outcome() settles the tokens, has the buckets
//   follow the provider's rate-limit headers (their limits and remaining) and decides ->
//   commit the verdict's transition -> tell whoever watches the job. A wait is a timer to the exact
//   time the policy names, cut short by any change that could let a page go.
//
// It maps the provider client's outcomes to the core's (a 429, a 503, unreachable, a 5xx or
// timeout or reset, a 4xx, an unreadable 2xx), holds the places of a previous process's
// calls out under the in-flight cap with timers, and warm-starts the buckets from the spend
// of the last minute. The outcome table itself is the policy's header comment and
// docs/architecture.md's.
//
// Thread safety: everything runs on the io_context's one thread, but for the commits of a
// CommitThread, when it has one (the constructor).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "fairlane/core/budget.hpp"
#include "fairlane/core/clock.hpp"
#include "fairlane/core/dispatch_policy.hpp"
#include "fairlane/core/door.hpp"
#include "fairlane/core/estimator.hpp"
#include "fairlane/core/fair_scheduler.hpp"
#include "fairlane/core/page_order.hpp"
#include "fairlane/core/promise_order.hpp"
#include "fairlane/core/status.hpp"
#include "fairlane/provider/provider.hpp"
#include "fairlane/store/group_commit.hpp"
#include "fairlane/store/store.hpp"
#include "service/metrics.hpp"

namespace boost::asio {
class io_context;
}

namespace fairlane::service {

class CommitThread;
class StoreReaders;

// The policy's settings (max_attempts ... call_timeout, seed) are passed on to it.
struct DispatcherConfig {
  BudgetLimits limits;
  std::string prompt = "Extract the text of this page and structure it as Markdown.";
  std::string model = "default";
  std::int64_t max_attempts = 5;    // failed attempts before a page fails for good
  std::int64_t max_requeues = 100;  // 429/503/unreachable returns before a page fails
  Clock::duration backoff_base = std::chrono::seconds(1);  // full jitter: [0, base * 2^n)
  Clock::duration backoff_max = std::chrono::seconds(60);
  Clock::duration default_pause = std::chrono::seconds(1);  // a 429/503 with no Retry-After
  // The longest a call may take (the provider client's timeout): at start, the calls a
  // previous process left out hold places under the cap for at most this long.
  Clock::duration call_timeout = std::chrono::seconds(120);
  std::int64_t quantum = 0;   // the scheduler's; 0: automatic
  EstimatorConfig estimator;  // its limits are taken from `limits`
  DoorConfig door;            // its tokens_per_minute is taken from `limits`
  GroupCommitOptions commits;
  // The order's; keep_promises false is plain deficit round robin (serve --order fair).
  PromiseOrderConfig order;
  std::uint64_t seed = std::random_device{}();  // for the backoff jitter
};

// What the dispatcher has done, for /metrics and tests.
struct DispatcherCounters {
  std::int64_t dispatched = 0;
  std::int64_t done = 0;
  std::int64_t failed = 0;
  std::int64_t requeued = 0;         // a 429 or 503, the provider unreachable, a text the store
                                     // could not give
  std::int64_t outage_pauses = 0;    // dispatch paused because the provider was unreachable
  std::int64_t calls_inherited = 0;  // a previous process's calls found out at start
  std::int64_t retried = 0;          // after a failed attempt
  std::int64_t provider_429 = 0;
  std::int64_t provider_503 = 0;
  // Page changes the store refused for what they held (GroupCommit::refused): each failed
  // its page instead, or was dropped.
  std::int64_t store_refused = 0;
  std::map<std::string, std::int64_t, std::less<>> outcomes;  // by outcome name
  // From a page joining its lane (its upload, or this start) to its first call since.
  Histogram queue_wait_seconds{{0.1, 0.5, 1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}};
  // From a call's dispatch to its answer, whatever the outcome.
  Histogram call_latency_seconds{{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120}};
};

// Whether a commit's failure ends this instance's leading: fenced or outcome_unknown. Any
// other failure leaves the batch to be committed again.
[[nodiscard]] inline bool ends_leading(const Status& commit) {
  return commit.code() == StatusCode::fenced || commit.code() == StatusCode::outcome_unknown;
}

class Dispatcher {
 public:
  // Called after a change to a job has committed (a page dispatched, done, failed...).
  using JobChanged = std::function<void(JobId)>;
  // Called once a commit ended its leading (ends_leading): it was fenced (another instance
  // of the cluster leads now), or its outcome is unknown (the connection broke while it was
  // out), so that what the store holds must be read again before anything builds on it.
  using Deposed = std::function<void(const Status&)>;

  // The store and the provider must outlive the dispatcher. Destroying it stops the loop,
  // commits what it can, and leaves calls still out to be requeued at the next start.
  // With `commit_store` (a second connection to the same database), the group commit's
  // batches are committed on a thread of their own (CommitThread) instead of on the io
  // thread, which goes on meanwhile: what a server database (PostgreSQL) needs; an embedded
  // one (SQLite) commits in microseconds and goes without. With `page_store` (a third), a
  // page's text is read for its call there, on a thread of its own, for the same reason.
  Dispatcher(boost::asio::io_context& io, Store& store, Provider& provider, DispatcherConfig config,
             std::unique_ptr<Store> commit_store = nullptr,
             std::unique_ptr<Store> page_store = nullptr);
  // NOLINTNEXTLINE(bugprone-exception-escape): see the definition
  ~Dispatcher();
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  // Loads the lanes (pages that were in flight go back to the head), warm-starts the
  // buckets from the last minute's spend, holds a place under the in-flight cap for each
  // call a previous process left out until it could have ended (twice the longest call of
  // the last ten minutes after its dispatch, at most call_timeout), and starts the loop.
  Status start();

  // In a cluster (a store with cluster(), DESIGN.md section 10), instead of start():
  //
  // follow() stops dispatching at once if this one did (calls still out are abandoned: the
  // instance that leads next holds their places and requeues their pages), and holds the
  // lanes as the store has them (ClusterStore::lanes_view) with the calls out, for the
  // door's answers and the positions. Called again, it reads them afresh.
  Status follow();
  // lead() fences every transition with (instance, epoch), then starts as start() does:
  // the previous leader's pages in flight go back to the heads of their lanes, its calls
  // hold places under the cap until they could have ended, the buckets warm-start from the
  // spend of the last minute. Once stop() was called it refuses (fenced): an instance told
  // to stop does not lead again.
  Status lead(std::string_view instance, std::int64_t epoch);
  // Whether the loop runs here (start() or lead(), not deposed or stopping since).
  [[nodiscard]] bool dispatching() const;
  void on_deposed(Deposed callback);

  // Pages of a job just enqueued join their lane; `weight` is its user's. Returns false,
  // changing nothing, when its pages are known already (a job heard of twice).
  bool add(const EnqueuedJob& job, std::int64_t weight);

  // Cancels a job: its queued pages leave the lanes and are cancelled in the store, in
  // order with the transitions before it, committed (fully synced) before this returns;
  // pages in flight finish. Returns the commit's outcome: on an error the cancellation
  // stays queued, in effect here, and commits with the next batch that goes through.
  Status cancel(UserId user, JobId job);
  // A job another instance cancelled (the store has its pages cancelled already): its
  // queued pages leave the lanes and its pages still out are forgotten as they come back,
  // as for cancel(), but nothing is written. Whoever watches the job is told. Returns how
  // many queued pages left.
  std::size_t cancelled_elsewhere(UserId user, JobId job);
  // Whether some page of `job` is known here (queued, held or out) and the job was not
  // cancelled since: what a notification about it could change.
  [[nodiscard]] bool tracks_job(JobId job) const;

  // The door's promise of a job already added, made again (a promise window's, PromiseWindow):
  // the order keeps it in place of the one add() took from the job.
  void promise(const JobView& job);

  // A user's weight, for the door's estimates before their lane has ever held a page.
  void set_weight(UserId user, std::int64_t weight);

  // Stops dispatching; calls in flight finish (their outcomes are stored) until
  // `deadline`, then everything queued is committed and `stopped` runs with ok, or with the
  // store's error when what was queued could not be committed. Pages held back for a
  // backoff stay queued in the store for the next start. A follow() or lead() before then
  // (this instance deposed while it stops) ends the stop at once, with ok: what is still
  // out is the next leader's to requeue, as after the deadline.
  void stop(Clock::duration deadline, std::function<void(Status)> stopped);

  void on_job_changed(JobChanged callback);

  [[nodiscard]] const FairScheduler& scheduler() const;
  [[nodiscard]] const Estimator& estimator() const;
  // The order pages go in (a PromiseOrder): where a job stands in it (PageOrder::project).
  [[nodiscard]] const PageOrder& order() const;
  // Pages the order sent in newer work's turns for a promise at risk, ever (0 in plain
  // fair order).
  [[nodiscard]] std::int64_t out_of_turn() const;
  // The jobs start() restored that the door had promised a finish: their promises hold in
  // the order again, and a Router made after start() watches them (Promises).
  [[nodiscard]] const std::vector<JobView>& restored_promises() const;
  [[nodiscard]] const Budget& budget() const;
  [[nodiscard]] const Door& door() const;
  [[nodiscard]] const DispatcherCounters& counters() const;
  [[nodiscard]] std::size_t in_flight() const;
  // Pages held back until their backoff ends.
  [[nodiscard]] std::size_t held() const;
  // Places under the in-flight cap still held for a previous process's calls (start()).
  [[nodiscard]] std::size_t inherited_in_flight() const;
  // Pages known to the dispatcher (queued, held or in flight), and cancelled jobs it keeps in
  // mind because some of their pages are still out: both bounded by what is in the lanes
  // and out, never by how many jobs were ever cancelled.
  [[nodiscard]] std::size_t tracked_pages() const;
  [[nodiscard]] std::size_t cancelled_jobs() const;
  // The last failure to commit transitions (ok when the last commit went through): while
  // it stands, results are not being saved, and the service is not ready.
  [[nodiscard]] const Status& store_error() const;
  // Until when all dispatch is paused after a 429/503 or with the provider unreachable;
  // nullopt when it is not.
  [[nodiscard]] std::optional<Clock::time_point> paused_until() const;
  // The decisions' state: pauses, outage pauses in a row, calls out, held pages.
  [[nodiscard]] const DispatchPolicy& policy() const;

 private:
  struct Impl;
  // A fresh state for follow() and lead(), the old one killed; counters and callbacks kept.
  void replace();
  // Where batches commit when not on the io thread; before impl_, so it outlives its use.
  std::unique_ptr<CommitThread> committer_;
  // Where a page's text is read for its call when not on the io thread; the same.
  std::unique_ptr<StoreReaders> page_reader_;
  // Shared with the loop's and the calls' coroutines, which may outlive the dispatcher.
  std::shared_ptr<Impl> impl_;
  bool stop_asked_ = false;  // stop() was called: it does not lead again
};

}  // namespace fairlane::service
