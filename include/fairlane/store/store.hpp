// Store: fairlane's durable state in SQLite: users, jobs, and the pages waiting in
// per-user lanes. An accepted job is a promise, so a job and all its pages are committed
// in one fully synced transaction before anyone is told it was accepted, and every page
// ends done, failed or cancelled, never lost and never completed twice.
//
// Errors are values: nothing throws across this interface. A locked, full, read-only or
// damaged database yields a Status naming the file and the remedy, and a failed write
// leaves nothing half-done.
//
// Thread safety: none. One thread owns a Store (the io_context thread in the service).
// Every method runs its SQL synchronously; GroupCommit batches page transitions.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fairlane/core/ids.hpp"
#include "fairlane/core/page_image.hpp"
#include "fairlane/core/result.hpp"
#include "fairlane/core/status.hpp"
#include "fairlane/store/job.hpp"
#include "fairlane/store/lane.hpp"
#include "fairlane/store/page_transition.hpp"

namespace fairlane {

class ClusterStore;

struct StoreOptions {
  // How long a write waits for another process's lock before failing with busy.
  std::chrono::milliseconds busy_timeout{5000};
  // The provider's price, for the cost a job view shows.
  double usd_per_million_tokens = 0.0;
  // Wall-clock time for what is persisted; system_clock::now when empty. Tests set it.
  std::function<WallTime()> wall_clock = {};
  // The SQLite VFS to open the file with; the default VFS when empty. Tests use it to
  // inject I/O faults (a full disk, a failing sync) beneath a real database.
  std::string vfs = {};
  // PostgreSQL: how long a call that has to make a new connection (the last one broke)
  // waits for it before failing with io_error; the connect goes on meanwhile, on a thread
  // of its own, and a later call takes it. Tests that need a reconnect to be seen at once
  // set it long.
  std::chrono::milliseconds connect_wait{1000};
};

struct User {
  UserId id = 0;
  std::string name;
  std::int64_t weight = 1;
};

// A user just added, with the only copy of their API key there will ever be.
struct NewUser {
  User user;
  std::string key;
};

struct PageInput {
  std::string text = {};
  std::int64_t estimated_tokens = 0;  // input estimate + max_tokens
  // text: `text` is sent; image: `image` is (with no text); blank: nothing, the page is
  // written done with an empty output and never enters a lane.
  PageKind kind = PageKind::text;
  std::optional<PageImage> image = {};
};

// An Idempotency-Key is 1 to this many bytes.
inline constexpr std::size_t kMaxIdempotencyKeyBytes = 255;
// A job's name (the upload's ?name=, its JSON's name or its file's name), in bytes as stored:
// enough for any file name, and little enough that every job object carrying it stays small.
inline constexpr std::size_t kMaxJobNameBytes = 1'024;

struct JobRequest {
  UserId user_id = 0;
  std::string name = {};
  std::vector<PageInput> pages = {};
  std::int64_t max_tokens = 0;
  std::optional<std::string> idempotency_key = {};
  // Seconds from acceptance to the finish the door promised (stored as promised_eta_at).
  std::optional<double> promised_eta_s = {};
  // What the upload was, kept for its idempotency key (KeyedJob): its media type and
  // Content-Length (std::nullopt when chunked), and the SHA-256 of what it held.
  std::optional<std::string> upload_head = {};
  std::optional<std::string> upload_digest = {};
};

// A job found by its upload's Idempotency-Key, with what that upload was (JobRequest's
// upload_head and upload_digest; both std::nullopt for a job stored without them, before
// 2026-12-07 or without a key).
struct KeyedJob {
  JobView job;
  std::optional<std::string> upload_head;
  std::optional<std::string> upload_digest;
};

struct EnqueuedJob {
  JobView job;
  bool created = false;         // false: the idempotency key named an earlier job
  std::vector<LanePage> pages;  // the new pages, in lane order (empty when !created)
};

struct JobList {
  std::vector<JobView> jobs;               // newest first
  std::optional<std::string> next_cursor;  // pass back for the next page of the list
};

// What the provider was sent in a window: calls made, and their tokens (reserved, or the
// reported usage once known).
struct Spend {
  std::int64_t requests = 0;
  std::int64_t tokens = 0;
};

// The calls a previous process left out at the provider (its pages still in flight in the
// store), and how long recent calls took, for holding their places under the in-flight cap.
struct CallsOut {
  std::vector<WallTime> dispatched_at;  // one per call still out
  // The longest call that ended in the window asked for; nullopt when none did.
  std::optional<std::chrono::milliseconds> longest_recent_call;
};

// A call that ended with the provider's usage, for the estimator's warm start.
struct EndedCall {
  std::int64_t tokens = 0;               // what the provider counted
  std::int64_t reserved_tokens = 0;      // what its page reserved: input estimate + max_tokens
  std::chrono::milliseconds latency{0};  // from its dispatch to its end being recorded
};

// A job as it arrived, for the estimator's arrivals after a restart.
struct ArrivedJob {
  JobId id = 0;
  UserId user_id = 0;
  std::int64_t pages = 0;
  WallTime created_at;
  std::optional<WallTime> finished_at;  // when its last page ended, if it has
};

// The jobs accepted lately, oldest first, and when the store's first job ever was: whether it
// was taking uploads through the whole of a window, or only since then.
struct RecentJobs {
  std::vector<ArrivedJob> jobs;
  std::optional<WallTime> first_job_at;  // none: the store has no job
};

// What a prune deleted (or, from prunable(), would delete).
struct Pruned {
  std::int64_t jobs = 0;
  std::int64_t pages = 0;
  bool more = false;  // prune(): more jobs are due than the budget let go: call again
};

// In a prune's budget an image page weighs as many text pages as this: its image is most
// of its bytes (a page's text is a few kB, a rendered page's image some hundred).
inline constexpr std::int64_t kPruneImageWeight = 50;

// What a page's call needs: its text, and the output tokens its job asks for.
struct PageCall {
  std::string text;
  std::int64_t max_tokens = 0;
  std::optional<PageImage> image = {};  // an image page's
};

class Store {
 public:
  // The schema version this fairlane writes (the number of the last migration).
  static int latest_schema_version();

  // Opens (creating if needed) the database at `path` (":memory:" for tests) with WAL,
  // foreign keys and a busy timeout, and migrates it to the latest schema, each migration
  // in its own transaction. A database written by a newer fairlane is refused. A
  // postgresql:// or postgres:// URI opens the PostgreSQL store instead (connected and
  // migrated likewise; docs/postgresql.md says what it does not do yet).
  static Result<std::unique_ptr<Store>> open(const std::string& path, StoreOptions options = {});
  // Whether `db` is a PostgreSQL connection URI (postgresql:// or postgres://).
  static bool is_postgresql_uri(std::string_view db);

  virtual ~Store() = default;

  [[nodiscard]] virtual const std::string& path() const = 0;

  // Users. The key is random, shown once, and stored only as its SHA-256.
  virtual Result<NewUser> add_user(std::string_view name, std::int64_t weight = 1) = 0;
  virtual Result<User> find_user_by_key(std::string_view key) = 0;
  virtual Result<User> find_user_by_name(std::string_view name) = 0;
  virtual Status set_weight(std::string_view name, std::int64_t weight) = 0;
  // Every user, by id (for the admin's view of the lanes).
  virtual Result<std::vector<User>> users() = 0;

  // Writes the job and all its pages in one transaction with synchronous=FULL: when this
  // returns, the job survives a crash or power loss. A repeated idempotency key of the
  // same user returns the first job unchanged (created = false).
  virtual Result<EnqueuedJob> enqueue_job(const JobRequest& request) = 0;

  // At start: turns every in_flight page back to queued (its attempts kept; it returns to
  // the head of its lane, since lanes are in page-id order) and returns the non-empty
  // lanes by user id, each head first, with ids and sizes only.
  virtual Result<std::vector<Lane>> load_lanes() = 0;

  // Applies the transitions in order, in one transaction (fully synced when it holds a
  // cancellation, which its user is told of). For each: 0 when it no longer applied (a
  // second completion, a late answer of an older call); for a dispatch, the call's number
  // (1 for a page's first call), to pass back with the call's outcome; else the pages it
  // changed. On error nothing is applied. A disk failure during the commit leaves the
  // outcome unknown: the store then refuses every write until it is opened again.
  virtual Result<std::vector<std::int64_t>> apply(std::span<const PageTransition> transitions) = 0;

  // Cancels the job's queued pages and returns how many; in-flight ones finish, and any of
  // them that comes back unanswered is cancelled too. not_found for an unknown job.
  virtual Result<std::int64_t> cancel_job(JobId job) = 0;

  // Reads.
  virtual Result<JobView> job(JobId job) = 0;
  // The views of the jobs of `ids` that exist, in id order, in one read however many they
  // are (an id not found is left out; one given twice is read once).
  virtual Result<std::vector<JobView>> jobs(std::span<const JobId> ids) = 0;

  // Records that `job` will now finish at `eta_at`, later than promised, and why.
  virtual Status revise_eta(JobId job, WallTime eta_at, std::string_view reason) = 0;
  // Records the door's promise for `job` as `promised_eta_at`, in place of the one written
  // with it: the promise made once the uploads that came with it were known (PromiseWindow),
  // before its answer was sent.
  virtual Status set_promise(JobId job, WallTime promised_eta_at) = 0;
  // The job with this public id if `owner` owns it; not_found otherwise (whether it
  // exists or not, so ids of other users' jobs cannot be probed).
  virtual Result<JobView> job_of(std::string_view public_id, UserId owner) = 0;
  // A user's jobs, newest first, `limit` at a time; `cursor` is the previous list's
  // next_cursor.
  virtual Result<JobList> jobs_of(UserId user, std::size_t limit,
                                  std::optional<std::string_view> cursor = std::nullopt) = 0;
  // The job `user` enqueued with this idempotency key, and what its upload was; not_found
  // when there is none.
  virtual Result<KeyedJob> job_by_idempotency_key(UserId user, std::string_view key) = 0;
  // The job's pages in order, with their output or error: at most `limit` of them, from the
  // page at 0-based `from_seq` on.
  virtual Result<std::vector<PageResult>> results_from(JobId job, std::int64_t from_seq,
                                                       std::int64_t limit) = 0;
  // All of the job's pages in order.
  Result<std::vector<PageResult>> results(JobId job) {
    return results_from(job, 0, std::numeric_limits<std::int64_t>::max());
  }
  // The page's text and its job's max_tokens; not_found for an unknown page.
  virtual Result<PageCall> page_call(PageId page) = 0;
  // Pages in flight now, per user that has any, by user id. At most the calls in flight are
  // read (through the index of pages in flight).
  virtual Result<std::vector<std::pair<UserId, std::int64_t>>> in_flight_by_user() = 0;
  // Calls dispatched in the last `window`, for warm-starting the budgets after a restart.
  virtual Result<Spend> recent_spend(std::chrono::milliseconds window) = 0;
  // At start: the calls sent in the last `window` that have not ended (their spend, which
  // a requeue of their pages by load_lanes() leaves as it is, so a start that failed after
  // it finds them again), and the longest call that ended in that window.
  virtual Result<CallsOut> calls_out(std::chrono::milliseconds window) = 0;
  // The last `limit` calls that ended with usage (within the spend kept, an hour), oldest
  // first: an estimator starts from what they cost and took, not from configured guesses.
  virtual Result<std::vector<EndedCall>> recent_calls(std::size_t limit) = 0;
  // The jobs created after `since`, at most the `limit` newest of them, oldest first: what a
  // restarted estimator counts as having arrived lately.
  virtual Result<RecentJobs> recent_jobs(WallTime since, std::size_t limit) = 0;

  // Retention (docs/operations.md): deletes the jobs that finished before `finished_before`,
  // the longest finished first, with their pages, texts, images and spend, in one transaction
  // of at most `budget` pages (an image page counts kPruneImageWeight; at least one job). A
  // pruned job is not found, like one that never was, and its idempotency key is free again.
  // The newest job is never pruned: an id is never used twice. Jobs still running are never
  // pruned, whatever their age.
  virtual Result<Pruned> prune(WallTime finished_before, std::int64_t budget) = 0;
  // The jobs and pages prune() would delete for `finished_before`, all of them, deleting
  // nothing.
  virtual Result<Pruned> prunable(WallTime finished_before) = 0;

  // Whether writes go through: the last write's failure for want of a disk (full,
  // read-only or failing), or ok once a write has committed since. /readyz reports it.
  [[nodiscard]] virtual Status write_health() const = 0;
  // Writes one page (the schema version, rewritten as it is) and returns what became of
  // it, which write_health() then reports: how a store whose writes failed learns that
  // space has returned while nothing else is being written.
  virtual Status probe_write() = 0;

  // The cluster's shared state (include/fairlane/store/cluster.hpp) on a store that several
  // instances can share (PostgreSQL); nullptr on one that cannot (SQLite).
  virtual ClusterStore* cluster() { return nullptr; }
};

}  // namespace fairlane
