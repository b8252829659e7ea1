// The SQLite implementation of Store. Schema: schema/sql (embedded at build time).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <unordered_map>
#include <utility>

#include "fairlane/store/store.hpp"
#include "store/checks.hpp"
#include "store/crypto.hpp"
#include "store/migrations.hpp"
#include "store/pg_store.hpp"
#include "store/queries.hpp"
#include "store/sqlite.hpp"

namespace fairlane {
namespace store {
namespace {

// Spend older than this is pruned; the budgets only ever look back a minute.
constexpr std::chrono::hours kSpendRetention{1};

// Sets synchronous=FULL for the life of the object (one transaction that must survive power
// loss before anyone is told), then NORMAL again.
class FullSync {
 public:
  explicit FullSync(Database& db) : db_(db) {
    status_ = db_.exec("PRAGMA synchronous = FULL", "asking for a fully synced commit");
  }
  FullSync(const FullSync&) = delete;
  FullSync& operator=(const FullSync&) = delete;
  ~FullSync() { (void)db_.exec("PRAGMA synchronous = NORMAL", "restoring normal sync"); }
  [[nodiscard]] const Status& status() const { return status_; }

 private:
  Database& db_;
  Status status_;
};

class SqliteStore final : public Store {
 public:
  static Result<std::unique_ptr<Store>> open(const std::string& path, StoreOptions options);

  const std::string& path() const override { return db_.path(); }

  Result<NewUser> add_user(std::string_view name, std::int64_t weight) override;
  Result<User> find_user_by_key(std::string_view key) override;
  Result<User> find_user_by_name(std::string_view name) override;
  Status set_weight(std::string_view name, std::int64_t weight) override;
  Result<std::vector<User>> users() override;
  Result<std::vector<std::pair<UserId, std::int64_t>>> in_flight_by_user() override;
  Result<EnqueuedJob> enqueue_job(const JobRequest& request) override;
  Result<std::vector<Lane>> load_lanes() override;
  Result<std::vector<std::int64_t>> apply(std::span<const PageTransition> transitions) override;
  Result<std::int64_t> cancel_job(JobId job) override;
  Result<JobView> job(JobId job) override;
  Result<std::vector<JobView>> jobs(std::span<const JobId> ids) override;
  Status revise_eta(JobId job, WallTime eta_at, std::string_view reason) override;
  Status set_promise(JobId job, WallTime promised_eta_at) override;
  Result<JobView> job_of(std::string_view public_id, UserId owner) override;
  Result<JobList> jobs_of(UserId user, std::size_t limit,
                          std::optional<std::string_view> cursor) override;
  Result<KeyedJob> job_by_idempotency_key(UserId user, std::string_view key) override;
  Result<std::vector<PageResult>> results_from(JobId job, std::int64_t from_seq,
                                               std::int64_t limit) override;
  Result<PageCall> page_call(PageId page) override;
  Result<Spend> recent_spend(std::chrono::milliseconds window) override;
  Result<CallsOut> calls_out(std::chrono::milliseconds window) override;
  Result<std::vector<EndedCall>> recent_calls(std::size_t limit) override;
  Result<RecentJobs> recent_jobs(WallTime since, std::size_t limit) override;
  Result<Pruned> prune(WallTime finished_before, std::int64_t budget) override;
  Result<Pruned> prunable(WallTime finished_before) override;
  Status write_health() const override { return write_health_; }
  Status probe_write() override;

 private:
  SqliteStore(Database db, StoreOptions options)
      : db_(std::move(db)), options_(std::move(options)) {}

  Status prepare_all();
  WallTime now() const {
    return options_.wall_clock ? options_.wall_clock() : std::chrono::system_clock::now();
  }
  Result<User> read_user(Statement& statement, std::string_view what);
  JobView read_job(const Statement& statement) const;
  Result<JobView> single_job(Statement& statement, std::string_view what);
  Result<std::int64_t> apply_one(const PageTransition& transition, std::int64_t now_ms);
  // Commits `tx`; a disk failure during the commit leaves the outcome unknown and stops
  // all further writes (broken_).
  Status commit(Transaction& tx, std::string_view what);

  // Constant after construction. db_ is declared first so it outlives the statements.
  Database db_;
  const StoreOptions options_;

  // Prepared once at open; only touched on the owning thread.
  Statement insert_user_, user_by_key_, user_by_name_, user_by_id_, set_weight_;
  Statement job_by_idempotency_key_, insert_job_, insert_page_, insert_text_, insert_image_;
  Statement requeue_in_flight_, queued_pages_, weights_;
  Statement dispatched_, insert_spend_, correct_spend_, completed_, attempt_failed_, requeued_;
  Statement failed_, mark_job_cancelled_, cancel_job_, prune_spend_;
  Statement job_by_id_, jobs_by_ids_, job_by_public_id_, jobs_of_first_, jobs_of_after_,
      job_id_by_public_id_;
  Statement results_, page_call_, recent_spend_, all_users_, in_flight_by_user_;
  Statement calls_out_, longest_call_, recent_calls_, revise_eta_, set_promise_;
  Statement recent_jobs_, first_job_at_;
  Statement prune_candidates_, prunable_, keep_first_job_at_, prune_job_spend_, prune_job_texts_,
      prune_job_images_, prune_job_pages_, prune_jobs_;
  // Set when a commit's outcome became unknown; every write then returns it.
  std::optional<Status> broken_;
  // The last write's failure for want of a disk; ok after a commit (see write_health).
  Status write_health_;

  // Records a failed write's status in write_health_ when the disk is to blame.
  void note(const Status& status) {
    const StatusCode code = status.code();
    if (code == StatusCode::disk_full || code == StatusCode::read_only ||
        code == StatusCode::io_error) {
      write_health_ = status;
    }
  }
  template <typename T>
  Result<T> noted(Result<T> result) {
    note(result.status());
    return result;
  }
  Result<NewUser> add_user_unnoted(std::string_view name, std::int64_t weight);
  Result<EnqueuedJob> enqueue_job_unnoted(const JobRequest& request);
  // A new page's text or image (`number` counts from 1, for the error).
  Status write_content(PageId page_id, const PageInput& page, std::size_t number);
  Result<std::vector<Lane>> load_lanes_unnoted();
  Result<std::vector<std::int64_t>> apply_unnoted(std::span<const PageTransition> transitions);
  Result<Pruned> prune_unnoted(WallTime finished_before, std::int64_t budget);
  // The jobs a prune takes: the longest finished first, as many as fit in `budget`.
  struct PruneBatch {
    std::vector<JobId> ids;
    bool more = false;  // others are due, which did not fit
  };
  Result<PruneBatch> prune_candidates(WallTime finished_before, std::int64_t budget);
};

Result<std::unique_ptr<Store>> SqliteStore::open(const std::string& path, StoreOptions options) {
  auto db = Database::open(path, options.vfs);
  if (!db.ok()) return db.status();
  // The busy timeout through the C API: no SQL is ever formatted (tests/sql_is_bound.sh).
  const auto busy_ms =
      std::clamp<std::int64_t>(options.busy_timeout.count(), 0, std::numeric_limits<int>::max());
  if (const int rc = sqlite3_busy_timeout(db->handle(), static_cast<int>(busy_ms));
      rc != SQLITE_OK) {
    return db->error(rc, "configuring the database");
  }
  if (Status s = db->exec("PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL;",
                          "configuring the database");
      !s.ok()) {
    return s;
  }
  // WAL lets readers run beside the writer and makes each commit one append. A database
  // in memory keeps its own journal mode.
  if (Status s = db->exec("PRAGMA journal_mode = WAL", "switching to write-ahead logging");
      !s.ok()) {
    return s;
  }
  if (Status s = migrate(db->handle(), path, Store::latest_schema_version()); !s.ok()) return s;

  std::unique_ptr<SqliteStore> store(new SqliteStore(std::move(db).value(), std::move(options)));
  if (Status s = store->prepare_all(); !s.ok()) return s;
  return std::unique_ptr<Store>(std::move(store));
}

Status SqliteStore::prepare_all() {
  const std::pair<Statement*, std::string_view> all[] = {
      {&insert_user_, Sql::insert_user},
      {&user_by_key_, Sql::user_by_key},
      {&user_by_name_, Sql::user_by_name},
      {&user_by_id_, Sql::user_by_id},
      {&set_weight_, Sql::set_weight},
      {&job_by_idempotency_key_, Sql::job_by_idempotency_key},
      {&insert_job_, Sql::insert_job},
      {&revise_eta_, Sql::revise_eta},
      {&set_promise_, Sql::set_promise},
      {&insert_page_, Sql::insert_page},
      {&insert_text_, Sql::insert_text},
      {&insert_image_, Sql::insert_image},
      {&requeue_in_flight_, Sql::requeue_in_flight},
      {&queued_pages_, Sql::queued_pages},
      {&weights_, Sql::weights},
      {&dispatched_, Sql::dispatched},
      {&insert_spend_, Sql::insert_spend},
      {&correct_spend_, Sql::correct_spend},
      {&completed_, Sql::completed},
      {&attempt_failed_, Sql::attempt_failed},
      {&requeued_, Sql::requeued},
      {&failed_, Sql::failed},
      {&mark_job_cancelled_, Sql::mark_job_cancelled},
      {&cancel_job_, Sql::cancel_job},
      {&prune_spend_, Sql::prune_spend},
      {&job_by_id_, Sql::job_by_id},
      {&jobs_by_ids_, Sql::jobs_by_ids},
      {&job_by_public_id_, Sql::job_by_public_id},
      {&jobs_of_first_, Sql::jobs_of_first},
      {&jobs_of_after_, Sql::jobs_of_after},
      {&job_id_by_public_id_, Sql::job_id_by_public_id},
      {&results_, Sql::results},
      {&page_call_, Sql::page_call},
      {&recent_spend_, Sql::recent_spend},
      {&calls_out_, Sql::calls_out},
      {&longest_call_, Sql::longest_call},
      {&recent_calls_, Sql::recent_calls},
      {&recent_jobs_, Sql::recent_jobs},
      {&first_job_at_, Sql::first_job_at},
      {&prune_candidates_, Sql::prune_candidates},
      {&prunable_, Sql::prunable},
      {&keep_first_job_at_, Sql::keep_first_job_at},
      {&prune_job_spend_, Sql::prune_job_spend},
      {&prune_job_texts_, Sql::prune_job_texts},
      {&prune_job_images_, Sql::prune_job_images},
      {&prune_job_pages_, Sql::prune_job_pages},
      {&prune_jobs_, Sql::prune_jobs},
      {&all_users_, Sql::all_users},
      {&in_flight_by_user_, Sql::in_flight_by_user},
  };
  for (const auto& [statement, sql] : all) {
    auto prepared = Statement::prepare(db_, sql);
    if (!prepared.ok()) return prepared.status();
    *statement = std::move(prepared).value();
  }
  return {};
}

// ---- users -------------------------------------------------------------------------------

Result<NewUser> SqliteStore::add_user(std::string_view name, std::int64_t weight) {
  return noted(add_user_unnoted(name, weight));
}

Result<NewUser> SqliteStore::add_user_unnoted(std::string_view name, std::int64_t weight) {
  if (broken_) return *broken_;
  if (Status s = check_user_name(name); !s.ok()) return s;
  if (Status s = check_weight(weight); !s.ok()) return s;
  auto made = new_key();
  if (!made.ok()) return made.status();
  std::string key = std::move(made->key);
  const Sha256& digest = made->digest;

  // The key is shown once: the user must exist for good before it is.
  const FullSync full_sync(db_);
  if (!full_sync.status().ok()) return full_sync.status();
  Transaction tx(db_);
  if (!tx.status().ok()) return tx.status();
  {
    Use insert(insert_user_);
    insert->bind(1, name).bind_blob(2, digest.data(), static_cast<int>(digest.size()));
    insert->bind(3, weight).bind(4, to_ms(now()));
    const int rc = insert->run();
    if (rc == SQLITE_CONSTRAINT_UNIQUE) {
      return Status{StatusCode::already_exists,
                    fmt::format("a user named '{}' exists already: pick another name", name)};
    }
    if (rc != SQLITE_DONE) return db_.error(rc, fmt::format("adding user '{}'", name));
  }
  const UserId id = db_.last_insert_rowid();
  if (Status s = commit(tx, fmt::format("adding user '{}'", name)); !s.ok()) return s;
  return NewUser{User{id, std::string(name), weight}, std::move(key)};
}

Result<User> SqliteStore::read_user(Statement& statement, std::string_view what) {
  Use use(statement);
  const int rc = use->step();
  if (rc == SQLITE_ROW) return User{use->int64(0), use->text(1), use->int64(2)};
  if (rc == SQLITE_DONE) return Status{StatusCode::not_found, fmt::format("no {}", what)};
  return db_.error(rc, fmt::format("looking up {}", what));
}

Result<User> SqliteStore::find_user_by_key(std::string_view key) {
  const auto digest = sha256(key);
  if (!digest) return Status{StatusCode::internal, "SHA-256 of the key failed"};
  user_by_key_.bind_blob(1, digest->data(), static_cast<int>(digest->size()));
  return read_user(user_by_key_, "user with this key");
}

Result<User> SqliteStore::find_user_by_name(std::string_view name) {
  user_by_name_.bind(1, name);
  return read_user(user_by_name_, fmt::format("user named '{}'", name));
}

Status SqliteStore::set_weight(std::string_view name, std::int64_t weight) {
  if (broken_) return *broken_;
  if (Status s = check_weight(weight); !s.ok()) return s;
  Use update(set_weight_);
  update->bind(1, name).bind(2, weight);
  if (const int rc = update->run(); rc != SQLITE_DONE) {
    return db_.error(rc, fmt::format("setting the weight of '{}'", name));
  }
  if (db_.changes() == 0) {
    return Status{StatusCode::not_found, fmt::format("no user named '{}'", name)};
  }
  return {};
}

Result<std::vector<User>> SqliteStore::users() {
  Use use(all_users_);
  std::vector<User> users;
  int rc = SQLITE_ROW;
  while ((rc = use->step()) == SQLITE_ROW) {
    users.push_back(User{use->int64(0), use->text(1), use->int64(2)});
  }
  if (rc != SQLITE_DONE) return db_.error(rc, "listing the users");
  return users;
}

Result<std::vector<std::pair<UserId, std::int64_t>>> SqliteStore::in_flight_by_user() {
  Use use(in_flight_by_user_);
  std::vector<std::pair<UserId, std::int64_t>> counts;
  int rc = SQLITE_ROW;
  while ((rc = use->step()) == SQLITE_ROW) counts.emplace_back(use->int64(0), use->int64(1));
  if (rc != SQLITE_DONE) return db_.error(rc, "counting the pages in flight");
  return counts;
}

// ---- jobs --------------------------------------------------------------------------------

Result<EnqueuedJob> SqliteStore::enqueue_job(const JobRequest& request) {
  return noted(enqueue_job_unnoted(request));
}

Result<EnqueuedJob> SqliteStore::enqueue_job_unnoted(const JobRequest& request) {
  if (broken_) return *broken_;
  const auto shape = check_job_request(request);
  if (!shape.ok()) return shape.status();
  const std::int64_t images = shape->images;
  const std::int64_t blank = shape->blank;
  user_by_id_.bind(1, request.user_id);
  auto owner = read_user(user_by_id_, fmt::format("user with id {}", request.user_id));
  if (!owner.ok()) return owner.status();

  // The job must survive power loss once acknowledged: this one transaction syncs fully.
  const FullSync full_sync(db_);
  if (!full_sync.status().ok()) return full_sync.status();

  Transaction tx(db_);
  if (!tx.status().ok()) return tx.status();

  if (request.idempotency_key) {
    Use find(job_by_idempotency_key_);
    find->bind(1, request.user_id).bind(2, *request.idempotency_key);
    const int rc = find->step();
    if (rc == SQLITE_ROW) {
      const JobId earlier = find->int64(0);
      auto view = job(earlier);
      if (!view.ok()) return view.status();
      return EnqueuedJob{std::move(view).value(), false, {}};
    }
    if (rc != SQLITE_DONE) return db_.error(rc, "looking up the idempotency key");
  }

  const auto public_suffix = random_hex(12);
  if (!public_suffix) return Status{StatusCode::internal, "the system's random generator failed"};
  const WallTime created_at = now();
  const auto page_count = static_cast<std::int64_t>(request.pages.size());
  std::optional<WallTime> promised_eta_at;
  if (request.promised_eta_s) {
    promised_eta_at =
        from_ms(to_ms(created_at + std::chrono::duration_cast<WallTime::duration>(
                                       std::chrono::duration<double>(*request.promised_eta_s))));
  }
  JobId job_id = 0;
  {
    Use insert(insert_job_);
    insert->bind(1, "job_" + *public_suffix).bind(2, request.user_id).bind(3, request.name);
    insert->bind(4, request.max_tokens);
    insert->bind_text(5, request.idempotency_key).bind(6, page_count).bind(7, to_ms(created_at));
    if (promised_eta_at) {
      insert->bind(8, to_ms(*promised_eta_at));
    } else {
      insert->bind(8, std::nullopt);
    }
    insert->bind(9, blank).bind(10, images);
    insert->bind_text(11, request.upload_head).bind_text(12, request.upload_digest);
    if (const int rc = insert->run(); rc != SQLITE_DONE) return db_.error(rc, "writing the job");
    job_id = db_.last_insert_rowid();
  }

  std::vector<LanePage> lane_pages;
  lane_pages.reserve(request.pages.size());
  for (std::size_t seq = 0; seq < request.pages.size(); ++seq) {
    const PageInput& page = request.pages[seq];
    Use insert_page(insert_page_);
    insert_page->bind(1, job_id).bind(2, request.user_id);
    insert_page->bind(3, static_cast<std::int64_t>(seq)).bind(4, page.estimated_tokens);
    insert_page->bind(5, to_string(page.kind)).bind(6, to_ms(created_at));
    if (const int rc = insert_page->run(); rc != SQLITE_DONE) {
      return db_.error(rc, fmt::format("writing page {} of the job", seq + 1));
    }
    const PageId page_id = db_.last_insert_rowid();
    if (page.kind == PageKind::blank) continue;  // done already, in no lane
    if (Status written = write_content(page_id, page, seq + 1); !written.ok()) return written;
    lane_pages.push_back(LanePage{page_id, job_id, page.estimated_tokens, std::nullopt, 0});
  }
  if (Status s = commit(tx, "enqueueing a job"); !s.ok()) return s;

  JobView view;
  view.id = job_id;
  view.public_id = "job_" + *public_suffix;
  view.user_id = request.user_id;
  view.user_name = owner->name;
  view.name = request.name;
  view.state = JobState::queued;
  view.pages.total = page_count;
  view.pages.queued = page_count - blank;
  view.pages.done = view.pages.blank = blank;
  view.pages.images = images;
  view.created_at = from_ms(to_ms(created_at));
  if (blank == page_count) {
    view.state = JobState::done;
    view.finished_at = view.created_at;
  }
  view.max_tokens = request.max_tokens;
  view.promised_eta_at = promised_eta_at;
  return EnqueuedJob{std::move(view), true, std::move(lane_pages)};
}

Status SqliteStore::write_content(PageId page_id, const PageInput& page, std::size_t number) {
  if (page.kind == PageKind::image) {
    Use insert_image(insert_image_);
    const PageImage& image = *page.image;
    insert_image->bind(1, page_id).bind(2, image.media_type).bind(3, image.width);
    insert_image->bind(4, image.height);
    insert_image->bind_blob(5, image.bytes.data(), static_cast<int>(image.bytes.size()));
    if (const int rc = insert_image->run(); rc != SQLITE_DONE) {
      return db_.error(rc, fmt::format("writing the image of page {}", number));
    }
    return {};
  }
  Use insert_text(insert_text_);
  insert_text->bind(1, page_id).bind(2, page.text);
  if (const int rc = insert_text->run(); rc != SQLITE_DONE) {
    return db_.error(rc, fmt::format("writing the text of page {}", number));
  }
  return {};
}

Result<std::vector<Lane>> SqliteStore::load_lanes() {
  return noted(load_lanes_unnoted());
}

Result<std::vector<Lane>> SqliteStore::load_lanes_unnoted() {
  if (broken_) return *broken_;
  {
    Transaction tx(db_);
    if (!tx.status().ok()) return tx.status();
    Use requeue(requeue_in_flight_);
    requeue->bind(1, to_ms(now()));
    if (const int rc = requeue->run(); rc != SQLITE_DONE) {
      return db_.error(rc, "returning in-flight pages to their lanes");
    }
    if (Status s = commit(tx, "returning in-flight pages to their lanes"); !s.ok()) return s;
  }

  std::unordered_map<UserId, std::int64_t> weights;
  {
    Use read(weights_);
    int rc = SQLITE_ROW;
    while ((rc = read->step()) == SQLITE_ROW) weights[read->int64(0)] = read->int64(1);
    if (rc != SQLITE_DONE) return db_.error(rc, "reading user weights");
  }

  std::vector<Lane> lanes;
  Use read(queued_pages_);
  int rc = SQLITE_ROW;
  while ((rc = read->step()) == SQLITE_ROW) {
    const UserId user = read->int64(0);
    if (lanes.empty() || lanes.back().user_id != user) {
      lanes.push_back(Lane{user, weights.contains(user) ? weights[user] : 1, {}});
    }
    lanes.back().pages.push_back(LanePage{read->int64(1), read->int64(2), read->int64(3),
                                          from_ms(read->optional_int64(4)), read->int64(5)});
  }
  if (rc != SQLITE_DONE) return db_.error(rc, "reading the lanes");
  for (Lane& lane : lanes) lane.pages.shrink_to_fit();
  return lanes;
}

Result<std::int64_t> SqliteStore::apply_one(const PageTransition& t, std::int64_t now_ms) {
  using Kind = PageTransition::Kind;
  // Runs `statement` (already bound) and returns the number of rows it changed.
  const auto run = [this](Statement& statement, std::string_view doing) -> Result<std::int64_t> {
    Use use(statement);
    if (const int rc = use->run(); rc != SQLITE_DONE) return db_.error(rc, doing);
    return db_.changes();
  };
  // Corrects the spend of the call `t` ends, while that call is in flight.
  const auto correct_spend = [&](std::int64_t tokens) -> Status {
    correct_spend_.bind(1, t.page_id).bind(2, tokens).bind(3, t.call).bind(4, now_ms);
    return run(correct_spend_, "recording the call's spend").status();
  };

  switch (t.kind) {
    case Kind::dispatched: {
      std::int64_t call = 0;
      {
        Use dispatch(dispatched_);
        dispatch->bind(1, t.page_id).bind(2, now_ms);
        int rc = dispatch->step();
        if (rc == SQLITE_ROW) {
          call = dispatch->int64(0);
          rc = dispatch->run();
        }
        if (rc != SQLITE_DONE) return db_.error(rc, "marking a page dispatched");
      }
      if (call == 0) return std::int64_t{0};
      insert_spend_.bind(1, t.page_id).bind(2, now_ms).bind(3, t.reserved_tokens);
      if (auto spent = run(insert_spend_, "recording the call's spend"); !spent.ok()) return spent;
      return call;
    }
    case Kind::completed: {
      if (Status s = correct_spend(t.usage.input_tokens + t.usage.output_tokens); !s.ok()) return s;
      completed_.bind(1, t.page_id).bind(2, t.output).bind(3, t.usage.input_tokens);
      completed_.bind(4, t.usage.output_tokens).bind(5, now_ms).bind(6, t.call);
      return run(completed_, "storing a page's result");
    }
    case Kind::attempt_failed: {
      if (Status s = correct_spend(0); !s.ok()) return s;
      attempt_failed_.bind(1, t.page_id).bind(2, t.error);
      attempt_failed_.bind(3, t.not_before ? std::optional(to_ms(*t.not_before)) : std::nullopt);
      attempt_failed_.bind(4, now_ms).bind(5, t.call);
      return run(attempt_failed_, "recording a failed attempt");
    }
    case Kind::requeued: {
      if (Status s = correct_spend(0); !s.ok()) return s;
      requeued_.bind(1, t.page_id).bind(2, now_ms).bind(3, t.call);
      return run(requeued_, "returning a page to its lane");
    }
    case Kind::failed: {
      if (Status s = correct_spend(0); !s.ok()) return s;
      failed_.bind(1, t.page_id).bind(2, t.error).bind(3, now_ms).bind(4, t.call);
      return run(failed_, "marking a page failed");
    }
    case Kind::job_cancelled: {
      mark_job_cancelled_.bind(1, t.job_id).bind(2, now_ms);
      auto marked = run(mark_job_cancelled_, "cancelling a job");
      if (!marked.ok() || marked.value() == 0) return marked;
      cancel_job_.bind(1, t.job_id).bind(2, now_ms);
      return run(cancel_job_, "cancelling a job's queued pages");
    }
  }
  return Status{StatusCode::internal, "unknown page transition"};
}

Result<std::vector<std::int64_t>> SqliteStore::apply(std::span<const PageTransition> transitions) {
  return noted(apply_unnoted(transitions));
}

Result<std::vector<std::int64_t>> SqliteStore::apply_unnoted(
    std::span<const PageTransition> transitions) {
  if (broken_) return *broken_;
  // A cancellation is acknowledged to its user: it must survive power loss.
  const bool acknowledged = std::any_of(transitions.begin(), transitions.end(), [](const auto& t) {
    return t.kind == PageTransition::Kind::job_cancelled;
  });
  std::optional<FullSync> full_sync;
  if (acknowledged) {
    full_sync.emplace(db_);
    if (!full_sync->status().ok()) return full_sync->status();
  }
  const WallTime at = now();
  const std::int64_t now_ms = to_ms(at);
  Transaction tx(db_);
  if (!tx.status().ok()) return tx.status();
  std::vector<std::int64_t> changed;
  changed.reserve(transitions.size());
  for (const PageTransition& transition : transitions) {
    auto result = apply_one(transition, now_ms);
    if (!result.ok()) return result.status();
    changed.push_back(result.value());
  }
  {
    Use prune(prune_spend_);
    prune->bind(1, to_ms(at - kSpendRetention));
    if (const int rc = prune->run(); rc != SQLITE_DONE) return db_.error(rc, "pruning old spend");
  }
  if (Status s = commit(tx, "recording page transitions"); !s.ok()) return s;
  return changed;
}

Result<std::int64_t> SqliteStore::cancel_job(JobId job) {
  auto exists = this->job(job);
  if (!exists.ok()) return exists.status();
  const PageTransition cancel = PageTransition::job_cancelled(job);
  auto changed = apply(std::span(&cancel, 1));
  if (!changed.ok()) return changed.status();
  return changed->front();
}

Status SqliteStore::probe_write() {
  if (broken_) return *broken_;
  Status status = [this]() -> Status {
    Transaction tx(db_);
    if (!tx.status().ok()) return tx.status();
    // The file's own version, written back as it is: a newer fairlane may have migrated it
    // since this one opened it, and this one's version would undo that.
    const auto version = schema_version(db_.handle(), db_.path());
    if (!version.ok()) return version.status();
    const std::string sql = fmt::format("PRAGMA user_version = {}", version.value());
    if (Status s = db_.exec(sql, "checking that the database can be written"); !s.ok()) return s;
    return commit(tx, "checking that the database can be written");
  }();
  note(status);
  return status;
}

Status SqliteStore::commit(Transaction& tx, std::string_view what) {
  Status status = tx.commit();
  if (status.ok()) write_health_ = {};
  if (status.code() == StatusCode::io_error) {
    // The disk failed while committing (a failed sync, say): the transaction may or may not
    // be in the log, and SQLite's recovery may yet replay it. Nothing more is written
    // until the store is opened again, so that nobody builds on an unknown state.
    broken_ = Status(StatusCode::io_error,
                     fmt::format("{}: the disk failed while committing to {}, so whether it was "
                                 "stored is unknown ({}). fairlane writes nothing more until it is "
                                 "restarted on a healthy disk; retry an upload with the same "
                                 "Idempotency-Key to learn whether it was accepted.",
                                 what, db_.path(), status.message()));
    return *broken_;
  }
  if (!status.ok()) return Status(status.code(), fmt::format("{}: {}", what, status.message()));
  return status;
}

// ---- reads -------------------------------------------------------------------------------

JobView SqliteStore::read_job(const Statement& s) const {
  JobView view;
  view.id = s.int64(0);
  view.public_id = s.text(1);
  view.user_id = s.int64(2);
  view.user_name = s.text(3);
  view.name = s.text(4);
  view.state = job_state_from(s.text(5)).value_or(JobState::queued);
  view.pages = PageCounts{s.int64(6),  s.int64(7),  s.int64(8),  s.int64(9),
                          s.int64(10), s.int64(11), s.int64(21), s.int64(22)};
  view.usage = Usage{s.int64(12), s.int64(13)};
  view.cost_usd = static_cast<double>(view.usage.input_tokens + view.usage.output_tokens) *
                  options_.usd_per_million_tokens / 1e6;
  view.max_tokens = s.int64(14);
  view.created_at = from_ms(s.int64(15));
  view.started_at = from_ms(s.optional_int64(16));
  view.finished_at = from_ms(s.optional_int64(17));
  view.promised_eta_at = from_ms(s.optional_int64(18));
  view.eta_revised_at = from_ms(s.optional_int64(19));
  view.eta_revised_reason = s.optional_text(20);
  return view;
}

Status SqliteStore::revise_eta(JobId job, WallTime eta_at, std::string_view reason) {
  if (broken_) return *broken_;
  Use update(revise_eta_);
  update->bind(1, job).bind(2, to_ms(eta_at)).bind(3, reason);
  if (const int rc = update->run(); rc != SQLITE_DONE) {
    return db_.error(rc, "recording a revised ETA");
  }
  return {};
}

Status SqliteStore::set_promise(JobId job, WallTime promised_eta_at) {
  if (broken_) return *broken_;
  Use update(set_promise_);
  update->bind(1, job).bind(2, to_ms(promised_eta_at));
  if (const int rc = update->run(); rc != SQLITE_DONE) {
    return db_.error(rc, "recording a job's promise");
  }
  return {};
}

Result<JobView> SqliteStore::single_job(Statement& statement, std::string_view what) {
  Use use(statement);
  const int rc = use->step();
  if (rc == SQLITE_ROW) return read_job(*use);
  if (rc == SQLITE_DONE) return Status{StatusCode::not_found, fmt::format("no {}", what)};
  return db_.error(rc, fmt::format("reading {}", what));
}

Result<JobView> SqliteStore::job(JobId job) {
  job_by_id_.bind(1, job);
  return single_job(job_by_id_, fmt::format("job with id {}", job));
}

Result<std::vector<JobView>> SqliteStore::jobs(std::span<const JobId> ids) {
  Use use(jobs_by_ids_);
  use->bind(1, fmt::format("[{}]", fmt::join(ids, ",")));
  std::vector<JobView> views;
  int rc = SQLITE_ROW;
  while ((rc = use->step()) == SQLITE_ROW) views.push_back(read_job(*use));
  if (rc != SQLITE_DONE) return db_.error(rc, fmt::format("reading {} jobs", ids.size()));
  return views;
}

Result<JobView> SqliteStore::job_of(std::string_view public_id, UserId owner) {
  job_by_public_id_.bind(1, public_id).bind(2, owner);
  return single_job(job_by_public_id_, fmt::format("job {}", public_id));
}

Result<JobList> SqliteStore::jobs_of(UserId user, std::size_t limit,
                                     std::optional<std::string_view> cursor) {
  if (Status s = check_list_limit(limit); !s.ok()) return s;
  Statement* list = &jobs_of_first_;
  if (cursor) {
    Use find(job_id_by_public_id_);
    find->bind(1, *cursor).bind(2, user);
    const int rc = find->step();
    if (rc == SQLITE_DONE) {
      return unknown_cursor(*cursor);
    }
    if (rc != SQLITE_ROW) return db_.error(rc, "reading the list cursor");
    jobs_of_after_.bind(3, find->int64(0));
    list = &jobs_of_after_;
  }
  Use use(*list);
  use->bind(1, user).bind(2, static_cast<std::int64_t>(limit) + 1);
  JobList page;
  int rc = SQLITE_ROW;
  while ((rc = use->step()) == SQLITE_ROW) page.jobs.push_back(read_job(*use));
  if (rc != SQLITE_DONE) return db_.error(rc, "listing jobs");
  if (page.jobs.size() > limit) {
    page.jobs.pop_back();
    page.next_cursor = page.jobs.back().public_id;
  }
  return page;
}

Result<KeyedJob> SqliteStore::job_by_idempotency_key(UserId user, std::string_view key) {
  JobId earlier = 0;
  KeyedJob keyed;
  {
    Use find(job_by_idempotency_key_);
    find->bind(1, user).bind(2, key);
    const int rc = find->step();
    if (rc == SQLITE_DONE) {
      return Status{StatusCode::not_found, "no job with this idempotency key"};
    }
    if (rc != SQLITE_ROW) return db_.error(rc, "looking up the idempotency key");
    earlier = find->int64(0);
    keyed.upload_head = find->optional_text(1);
    keyed.upload_digest = find->optional_text(2);
  }
  auto view = job(earlier);
  if (!view.ok()) return view.status();
  keyed.job = std::move(view).value();
  return keyed;
}

Result<std::vector<PageResult>> SqliteStore::results_from(JobId job, std::int64_t from_seq,
                                                          std::int64_t limit) {
  Use use(results_);
  use->bind(1, job);
  use->bind(2, from_seq);
  use->bind(3, limit);
  std::vector<PageResult> pages;
  int rc = SQLITE_ROW;
  while ((rc = use->step()) == SQLITE_ROW) {
    PageResult page;
    page.seq = use->int64(0);
    page.state = page_state_from(use->text(1)).value_or(PageState::queued);
    page.output = use->optional_text(2);
    page.error = use->optional_text(3);
    page.usage = Usage{use->optional_int64(4).value_or(0), use->optional_int64(5).value_or(0)};
    page.attempts = use->int64(6);
    page.kind = page_kind_from(use->text(7)).value_or(PageKind::text);
    pages.push_back(std::move(page));
  }
  if (rc != SQLITE_DONE) return db_.error(rc, "reading the job's results");
  return pages;
}

Result<PageCall> SqliteStore::page_call(PageId page) {
  Use use(page_call_);
  use->bind(1, page);
  const int rc = use->step();
  if (rc == SQLITE_ROW) {
    PageCall call{use->text(1), use->int64(2), std::nullopt};
    if (use->text(0) == "image" && !use->is_null(3)) {
      call.image = PageImage{use->text(3), use->int64(4), use->int64(5), use->blob(6)};
    }
    return call;
  }
  if (rc == SQLITE_DONE) return Status{StatusCode::not_found, fmt::format("no page {}", page)};
  return db_.error(rc, "reading a page's text");
}

Result<Spend> SqliteStore::recent_spend(std::chrono::milliseconds window) {
  Use use(recent_spend_);
  use->bind(1, to_ms(now()) - window.count());
  const int rc = use->step();
  if (rc != SQLITE_ROW) return db_.error(rc, "reading recent spend");
  return Spend{use->int64(0), use->int64(1)};
}

Result<CallsOut> SqliteStore::calls_out(std::chrono::milliseconds window) {
  CallsOut out;
  const std::int64_t since = to_ms(now()) - window.count();
  {
    Use use(calls_out_);
    use->bind(1, since);
    int rc = SQLITE_ROW;
    while ((rc = use->step()) == SQLITE_ROW) {
      out.dispatched_at.emplace_back(std::chrono::milliseconds(use->int64(0)));
    }
    if (rc != SQLITE_DONE) return db_.error(rc, "reading the calls still out");
  }
  Use use(longest_call_);
  use->bind(1, since);
  if (const int rc = use->step(); rc != SQLITE_ROW) {
    return db_.error(rc, "reading how long recent calls took");
  }
  if (!use->is_null(0)) out.longest_recent_call = std::chrono::milliseconds(use->int64(0));
  return out;
}

Result<std::vector<EndedCall>> SqliteStore::recent_calls(std::size_t limit) {
  Use use(recent_calls_);
  use->bind(1, static_cast<std::int64_t>(limit));
  std::vector<EndedCall> calls;
  int rc = SQLITE_ROW;
  while ((rc = use->step()) == SQLITE_ROW) {
    calls.push_back(
        EndedCall{use->int64(0), use->int64(1), std::chrono::milliseconds(use->int64(2))});
  }
  if (rc != SQLITE_DONE) return db_.error(rc, "reading the calls that ended lately");
  std::reverse(calls.begin(), calls.end());  // oldest first
  return calls;
}

Result<RecentJobs> SqliteStore::recent_jobs(WallTime since, std::size_t limit) {
  RecentJobs out;
  {
    Use first(first_job_at_);
    const int rc = first->step();
    if (rc != SQLITE_ROW) return db_.error(rc, "reading the first job");
    out.first_job_at = from_ms(first->optional_int64(0));
  }
  Use use(recent_jobs_);
  use->bind(1, to_ms(since)).bind(2, static_cast<std::int64_t>(limit));
  int rc = SQLITE_ROW;
  while ((rc = use->step()) == SQLITE_ROW) {
    out.jobs.push_back(ArrivedJob{use->int64(0), use->int64(1), use->int64(2),
                                  from_ms(use->int64(3)), from_ms(use->optional_int64(4))});
  }
  if (rc != SQLITE_DONE) return db_.error(rc, "reading the jobs created lately");
  return out;
}

// ---- retention ---------------------------------------------------------------------------

Result<Pruned> SqliteStore::prune(WallTime finished_before, std::int64_t budget) {
  return noted(prune_unnoted(finished_before, budget));
}

Result<Pruned> SqliteStore::prune_unnoted(WallTime finished_before, std::int64_t budget) {
  if (broken_) return *broken_;
  Transaction tx(db_);
  if (!tx.status().ok()) return tx.status();
  auto batch = prune_candidates(finished_before, budget);
  if (!batch.ok()) return batch.status();
  const std::vector<JobId>& ids = batch->ids;
  Pruned pruned;
  pruned.more = batch->more;
  if (ids.empty()) return pruned;
  const std::string doing = fmt::format("pruning {} finished jobs", ids.size());
  {
    Use keep(keep_first_job_at_);
    if (const int rc = keep->run(); rc != SQLITE_DONE) return db_.error(rc, doing);
  }
  const std::string list = fmt::format("[{}]", fmt::join(ids, ","));
  // In the order of the foreign keys: what refers to a page, the pages, their jobs.
  for (Statement* statement : {&prune_job_spend_, &prune_job_texts_, &prune_job_images_,
                               &prune_job_pages_, &prune_jobs_}) {
    Use del(*statement);
    del->bind(1, list);
    if (const int rc = del->run(); rc != SQLITE_DONE) return db_.error(rc, doing);
    if (statement == &prune_job_pages_) pruned.pages = db_.changes();
    if (statement == &prune_jobs_) pruned.jobs = db_.changes();
  }
  if (Status s = commit(tx, doing); !s.ok()) return s;
  return pruned;
}

Result<SqliteStore::PruneBatch> SqliteStore::prune_candidates(WallTime finished_before,
                                                              std::int64_t budget) {
  // A job weighs at least a page, so more than `budget` jobs never fit: the one more read
  // tells whether any is left.
  const std::int64_t limit = std::max<std::int64_t>(budget, 1) + 1;
  Use use(prune_candidates_);
  use->bind(1, to_ms(finished_before)).bind(2, limit).bind(3, kPruneImageWeight);
  PruneBatch batch;
  std::int64_t weight = 0;
  int rc = SQLITE_ROW;
  while ((rc = use->step()) == SQLITE_ROW) {
    const std::int64_t w = use->int64(1);
    if (!batch.ids.empty() && weight + w > budget) {
      batch.more = true;
      break;
    }
    batch.ids.push_back(use->int64(0));
    weight += w;
  }
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return db_.error(rc, "reading the jobs due to go");
  return batch;
}

Result<Pruned> SqliteStore::prunable(WallTime finished_before) {
  Use use(prunable_);
  use->bind(1, to_ms(finished_before));
  const int rc = use->step();
  if (rc != SQLITE_ROW) return db_.error(rc, "counting the jobs due to go");
  return Pruned{use->int64(0), use->int64(1), false};
}

}  // namespace
}  // namespace store

int Store::latest_schema_version() {
  return store::migrations().back().version;
}

bool Store::is_postgresql_uri(std::string_view db) {
  return db.starts_with("postgresql://") || db.starts_with("postgres://");
}

Result<std::unique_ptr<Store>> Store::open(const std::string& path, StoreOptions options) {
  if (is_postgresql_uri(path)) {
    auto opened = store::PgStore::open(path, std::move(options));
    if (!opened.ok()) return opened.status();
    return std::unique_ptr<Store>(std::move(opened).value());
  }
  return store::SqliteStore::open(path, std::move(options));
}

}  // namespace fairlane
