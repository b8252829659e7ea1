// PgStore: the Store over PostgreSQL (DESIGN.md section 10): open (connect, migrate), users,
// enqueue a job in one round trip, load the lanes, every read, and the page transitions (a
// batch in one round trip) with the write health. Store::open selects it for a postgresql://
// or postgres:// URI. It is also the ClusterStore (Store::cluster() returns it): the leader's
// lease (one row, schema/pg/0003_cluster.sql), the fence that every page transition of the
// leader carries (a deposed leader's batch changes nothing and returns fenced, which neither
// breaks the store nor counts against its write health), the reads a follower needs, and
// NOTIFY of every job enqueued or changed, in the transaction that writes it.
//
// A connection that breaks (the server restarted, failed over or ended it, the network went)
// is made again (docs/postgresql.md, "Connections that break"): a connection found broken
// before a statement is sent is replaced first; a read it broke under is asked once more on
// a new one; a write it broke under returns outcome_unknown, and the next call connects
// again. A new connection is made on a thread of its own: the call that starts it waits for
// it up to options.connect_wait, and while it is still being made (a server gone silent: up
// to libpq's connect_timeout, and the keepalives' 10 s for each statement of its set-up)
// calls fail at once with io_error. While connecting fails, calls fail with its reason, and
// it is tried again after a pause of 100 ms doubling to 5 s.
//
// Thread safety: none. One thread owns a PgStore, as a SqliteStore; every method blocks on
// the server (a connection's keepalives bound how long a silent one holds it, pg.hpp).
// Destroying it waits for a connect still being made.
#pragma once

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fairlane/core/result.hpp"
#include "fairlane/store/cluster.hpp"
#include "fairlane/store/store.hpp"
#include "store/pg.hpp"

namespace fairlane::store {

class PgStore final : public Store, public ClusterStore {
 public:
  // Connects to `uri`, asks for synchronous commits and migrates the database to the latest
  // PostgreSQL schema (refusing a newer one). options.busy_timeout and options.vfs are
  // SQLite's and not used.
  static Result<std::unique_ptr<PgStore>> open(const std::string& uri, StoreOptions options = {});

  // The server, as pg::describe names it (never the password).
  [[nodiscard]] const std::string& path() const override { return server_; }

  Result<NewUser> add_user(std::string_view name, std::int64_t weight) override;
  Result<User> find_user_by_key(std::string_view key) override;
  Result<User> find_user_by_name(std::string_view name) override;
  Result<std::vector<User>> users() override;
  // One statement: the job, its pages, texts and images, whatever their number.
  Result<EnqueuedJob> enqueue_job(const JobRequest& request) override;
  Result<std::vector<Lane>> load_lanes() override;
  Result<JobView> job(JobId job) override;
  // One statement, the ids as an array.
  Result<std::vector<JobView>> jobs(std::span<const JobId> ids) override;
  Result<JobView> job_of(std::string_view public_id, UserId owner) override;
  Result<JobList> jobs_of(UserId user, std::size_t limit,
                          std::optional<std::string_view> cursor) override;
  Result<KeyedJob> job_by_idempotency_key(UserId user, std::string_view key) override;
  Result<std::vector<PageResult>> results_from(JobId job, std::int64_t from_seq,
                                               std::int64_t limit) override;
  Result<PageCall> page_call(PageId page) override;
  Status set_weight(std::string_view name, std::int64_t weight) override;
  Status revise_eta(JobId job, WallTime eta_at, std::string_view reason) override;
  Status set_promise(JobId job, WallTime promised_eta_at) override;
  Result<std::vector<std::pair<UserId, std::int64_t>>> in_flight_by_user() override;
  Result<Spend> recent_spend(std::chrono::milliseconds window) override;
  Result<CallsOut> calls_out(std::chrono::milliseconds window) override;
  Result<std::vector<EndedCall>> recent_calls(std::size_t limit) override;
  Result<RecentJobs> recent_jobs(WallTime since, std::size_t limit) override;
  Result<Pruned> prune(WallTime finished_before, std::int64_t budget) override;
  Result<Pruned> prunable(WallTime finished_before) override;

  // Page transitions: the whole batch in one statement (one round trip, one transaction), on
  // the server (fairlane_apply, schema/pg/0003_cluster.sql), with the SQLite store's effects,
  // fenced by the instance and epoch fence() was given (fenced, nothing written, when they
  // no longer hold the lease; a batch of cancellations only is never fenced). Each job it
  // changed is notified on kJobChangedChannel at commit.
  Result<std::vector<std::int64_t>> apply(std::span<const PageTransition> transitions) override;
  Result<std::int64_t> cancel_job(JobId job) override;
  [[nodiscard]] Status write_health() const override;
  Status probe_write() override;

  ClusterStore* cluster() override { return this; }

  // ClusterStore (include/fairlane/store/cluster.hpp). The lease in one statement each
  // (fairlane_claim_lease; release expires it now); `instance` must not be empty and `lease`
  // must be positive.
  Result<LeaseState> claim_lease(std::string_view instance,
                                 std::chrono::milliseconds lease) override;
  Status release_lease(std::string_view instance) override;
  void fence(std::string_view instance, std::int64_t epoch) override;
  // One read: the job view joined with its queued pages.
  Result<EnqueuedJob> queued_job(JobId job) override;
  // load_lanes()'s read without its requeue: pages in flight stay in flight, not in a lane.
  Result<std::vector<Lane>> lanes_view() override;

  // Statements sent to the server since open (migrations included, on every connection it
  // made), for tests of how many round trips an operation costs.
  [[nodiscard]] std::int64_t round_trips() const {
    return round_trips_before_ + (connection_ ? connection_->round_trips() : 0);
  }
  // How often a broken connection was made again.
  [[nodiscard]] std::int64_t reconnects() const { return reconnects_; }
  // Whether a new connection has been made on its thread and waits to be taken by a call,
  // for tests that act between the two.
  [[nodiscard]] bool connection_made() const {
    return connecting_.valid() &&
           connecting_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  }
  // The server process of the connection open now (0: none), for tests that end it.
  [[nodiscard]] int backend_pid() const { return connection_ ? connection_->backend_pid() : 0; }

 private:
  PgStore(std::string uri, pg::Connection connection, StoreOptions options)
      : uri_(std::move(uri)),
        server_(connection.server()),
        connection_(std::move(connection)),
        options_(std::move(options)) {}

  // A connection to `uri` ready for the store: synchronous commits, the schema migrated to
  // the latest version this fairlane knows (refusing a newer one), the statements of the hot
  // paths prepared.
  static Result<pg::Connection> connect(const std::string& uri);
  // The connection open, if it still works, or a new one; while connecting fails, its reason
  // (with `doing`), without trying before the pause after the last try is over; while a new
  // one is still being made after options_.connect_wait, io_error at once.
  Result<pg::Connection*> session(std::string_view doing);
  // Whether a new connection may be tried now: no pause, or the pause after the last failed
  // try is over.
  [[nodiscard]] bool connect_due() const;
  // Starts making a new connection on a thread of its own (connecting_); io_error, with
  // `doing`, when no thread can be started.
  Status start_connect(std::string_view doing);
  // What the connect that has ended made: the open connection (connected); a connection
  // that broke before it was taken, to be made again if `may_retry` (broke_before_use); or,
  // failed, its reason kept and the pause before the next try doubled.
  enum class Taken { connected, broke_before_use, failed };
  Taken take_connect(bool may_retry);
  // A statement that changes nothing, asked once more on a new connection if the one it was
  // sent on broke under it.
  Result<pg::Rows> read(std::string_view sql, std::span<const pg::Param> params,
                        std::string_view doing);
  // A statement that writes, sent on a connection found working. If that connection breaks
  // while it is out, whether it was stored is unknown: outcome_unknown, saying so.
  Result<pg::Rows> write(std::string_view sql, std::span<const pg::Param> params,
                         std::string_view doing);

  Result<std::vector<std::int64_t>> apply_unnoted(std::span<const PageTransition> transitions);
  // The queued pages of every lane, with their owners' weights, as they stand.
  Result<std::vector<Lane>> read_lanes();
  // Records a failed write's status in write_health_ when the disk or server is to blame.
  void note(const Status& status);

  WallTime now() const {
    return options_.wall_clock ? options_.wall_clock() : std::chrono::system_clock::now();
  }

  // Only touched on the owning thread.
  const std::string uri_;
  const std::string server_;
  // The connection, if one is open; none after it broke, until a call connects again.
  std::optional<pg::Connection> connection_;
  // A new connection being made on a thread of its own (connect(uri_)), if one is.
  std::future<Result<pg::Connection>> connecting_;
  std::int64_t round_trips_before_ = 0;  // of the connections closed
  std::int64_t reconnects_ = 0;
  // While connecting fails: why it last did, and when to try next (after a pause of 100 ms,
  // doubling to 5 s).
  Status connect_error_;
  WallTime connect_at_{};
  std::chrono::milliseconds connect_pause_{0};
  // The last write's failure for want of a disk (full, read-only, or the server gone); ok
  // once a write has committed since.
  Status write_health_;
  // The fence every page transition carries (fence()); epoch 0: unfenced.
  std::string fence_instance_;
  std::int64_t fence_epoch_ = 0;
  // Constant after construction.
  const StoreOptions options_;
};

}  // namespace fairlane::store
