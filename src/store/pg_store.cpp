// The PostgreSQL implementation of Store (see pg_store.hpp for what it does and does not).
// Schema: schema/pg (embedded at build time); SQL: pg_queries.hpp.
#include "store/pg_store.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <optional>
#include <system_error>
#include <utility>
#include <vector>

#include "store/checks.hpp"
#include "store/crypto.hpp"
#include "store/pg_migrations.hpp"
#include "store/pg_queries.hpp"

namespace fairlane::store {
namespace {

// Spend older than this is pruned; the budgets only ever look back a minute.
constexpr std::chrono::hours kSpendRetention{1};

// The integers of a bigint[] in PostgreSQL's text form ("{1,0,2}"); nullopt if it is not one.
std::optional<std::vector<std::int64_t>> parse_int64_array(std::string_view text) {
  if (text.size() < 2 || text.front() != '{' || text.back() != '}') return std::nullopt;
  text = text.substr(1, text.size() - 2);
  std::vector<std::int64_t> values;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    std::int64_t value = 0;
    const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (error != std::errc{} || end != item.data() + item.size()) return std::nullopt;
    values.push_back(value);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return values;
}

std::optional<std::string_view> view_of(const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  return std::string_view(*text);
}

JobView read_job(const pg::Rows& rows, int row, double usd_per_million_tokens) {
  JobView view;
  view.id = rows.int64(row, 0);
  view.public_id = rows.text(row, 1);
  view.user_id = rows.int64(row, 2);
  view.user_name = rows.text(row, 3);
  view.name = rows.text(row, 4);
  view.state = job_state_from(rows.text(row, 5)).value_or(JobState::queued);
  view.pages = PageCounts{rows.int64(row, 6),  rows.int64(row, 7),  rows.int64(row, 8),
                          rows.int64(row, 9),  rows.int64(row, 10), rows.int64(row, 11),
                          rows.int64(row, 21), rows.int64(row, 22)};
  view.usage = Usage{rows.int64(row, 12), rows.int64(row, 13)};
  view.cost_usd = static_cast<double>(view.usage.input_tokens + view.usage.output_tokens) *
                  usd_per_million_tokens / 1e6;
  view.max_tokens = rows.int64(row, 14);
  view.created_at = from_ms(rows.int64(row, 15));
  view.started_at = from_ms(rows.optional_int64(row, 16));
  view.finished_at = from_ms(rows.optional_int64(row, 17));
  view.promised_eta_at = from_ms(rows.optional_int64(row, 18));
  view.eta_revised_at = from_ms(rows.optional_int64(row, 19));
  if (!rows.is_null(row, 20)) view.eta_revised_reason = std::string(rows.text(row, 20));
  return view;
}

// The user a lookup found, or not_found.
Result<User> user_from(Result<pg::Rows> rows, std::string_view what) {
  if (!rows.ok()) return rows.status();
  if (rows->size() == 0) return Status{StatusCode::not_found, fmt::format("no {}", what)};
  return User{rows->int64(0, 0), std::string(rows->text(0, 1)), rows->int64(0, 2)};
}

}  // namespace

Result<std::unique_ptr<PgStore>> PgStore::open(const std::string& uri, StoreOptions options) {
  auto connection = connect(uri);
  if (!connection.ok()) return connection.status();
  return std::unique_ptr<PgStore>(
      new PgStore(uri, std::move(connection).value(), std::move(options)));
}

Result<pg::Connection> PgStore::connect(const std::string& uri) {
  auto connection = pg::Connection::open(uri);
  if (!connection.ok()) return connection.status();
  if (Status s = connection->exec(PgSql::synchronous_commit, "asking for synchronous commits");
      !s.ok()) {
    return s;
  }
  const auto all = pg_migrations();
  if (Status s = pg_migrate(*connection, all.back().version); !s.ok()) return s;
  // The statements of the hot paths (a request's key, an upload, the job view, a dispatch's
  // page, a batch of transitions, the follower's reads), prepared once on this connection, so
  // that the server does not parse and plan them again on every call.
  for (const std::string_view sql :
       {PgSql::user_by_key, PgSql::enqueue_job, PgSql::job_by_id, PgSql::job_by_public_id,
        PgSql::results, PgSql::page_call, PgSql::revise_eta, PgSql::queued_job,
        PgSql::in_flight_by_user, PgSql::recent_spend, PgSql::recent_calls, PgSql::apply,
        PgSql::claim_lease}) {
    if (Status s = connection->prepare(sql, "preparing the store's statements"); !s.ok()) {
      return s;
    }
  }
  return connection;
}

// ---- the connection ----------------------------------------------------------------------

Result<pg::Connection*> PgStore::session(std::string_view doing) {
  if (connection_ && connection_->alive()) return &*connection_;
  if (connection_) {  // broken: nothing more can be sent on it
    round_trips_before_ += connection_->round_trips();
    connection_.reset();
  }
  // The connect goes on a thread of its own: a server gone silent would hold the caller (the
  // io thread, for the main store) until connect_timeout. The call that starts it waits a
  // little, which a server that answers needs; the calls after it do not wait at all. A
  // connection made long before it is taken may have broken since: it is checked as the
  // open one is, and made again once.
  for (int tries = 0; tries < 2; ++tries) {
    auto wait = std::chrono::milliseconds(0);
    if (!connecting_.valid()) {
      if (!connect_due()) break;
      if (Status started = start_connect(doing); !started.ok()) return started;
      wait = options_.connect_wait;
    }
    if (connecting_.wait_for(wait) != std::future_status::ready) {
      return Status{StatusCode::io_error,
                    fmt::format("{}: the connection to PostgreSQL at {} broke, and a new one is "
                                "being made, which the server has not answered within {} ms "
                                "(calls fail at once until it has)",
                                doing, server_, options_.connect_wait.count())};
    }
    const Taken taken = take_connect(tries == 0);
    if (taken == Taken::connected) return &*connection_;
    if (taken == Taken::failed) break;
  }
  return Status{connect_error_.code(),
                fmt::format("{}: the connection to PostgreSQL broke and is not made again yet "
                            "(fairlane tries again every {} ms at most): {}",
                            doing, connect_pause_.count(), connect_error_.message())};
}

Status PgStore::start_connect(std::string_view doing) {
  try {
    connecting_ = std::async(std::launch::async, [uri = uri_] { return connect(uri); });
  } catch (const std::system_error& error) {  // no thread to be had
    return Status{StatusCode::io_error,
                  fmt::format("{}: connecting to PostgreSQL again needs a thread, and none "
                              "could be started ({})",
                              doing, error.what())};
  }
  return {};
}

PgStore::Taken PgStore::take_connect(bool may_retry) {
  auto made = connecting_.get();
  Status failed = made.status();
  if (made.ok() && !made->alive()) {
    round_trips_before_ += made->round_trips();
    if (may_retry) return Taken::broke_before_use;
    failed = Status{
        StatusCode::io_error,
        fmt::format("the new connection to PostgreSQL at {} broke before it was used", server_)};
  }
  if (!failed.ok()) {
    constexpr std::chrono::milliseconds kFirstPause{100};
    constexpr std::chrono::milliseconds kLongestPause{5'000};
    connect_pause_ = std::clamp(connect_pause_ * 2, kFirstPause, kLongestPause);
    connect_at_ = now() + connect_pause_;
    connect_error_ = std::move(failed);
    return Taken::failed;
  }
  connection_.emplace(std::move(made).value());
  connect_pause_ = std::chrono::milliseconds(0);
  connect_error_ = {};
  ++reconnects_;
  return Taken::connected;
}

bool PgStore::connect_due() const {
  // Due after the pause, or at once when the clock went back past the last try (a wall
  // clock stepped back must not hold the store off for as long).
  const WallTime at = now();
  return connect_pause_.count() == 0 || at >= connect_at_ || connect_at_ - at > connect_pause_;
}

Result<pg::Rows> PgStore::read(std::string_view sql, std::span<const pg::Param> params,
                               std::string_view doing) {
  auto connection = session(doing);
  if (!connection.ok()) return connection.status();
  auto rows = (*connection)->query(sql, params, doing);
  if (rows.ok() || !(*connection)->lost()) return rows;
  // Broken under the read, which changed nothing: once more, on a new connection.
  connection = session(doing);
  if (!connection.ok()) return connection.status();
  return (*connection)->query(sql, params, doing);
}

Result<pg::Rows> PgStore::write(std::string_view sql, std::span<const pg::Param> params,
                                std::string_view doing) {
  auto connection = session(doing);
  if (!connection.ok()) return connection.status();
  auto rows = (*connection)->query(sql, params, doing);
  if (rows.ok() || !(*connection)->lost()) return rows;
  // Sent, and the answer lost with the connection: the server may have committed it or not.
  // The next call connects again; it is the caller's to find out, by reading, before it
  // builds on this write.
  return Status{StatusCode::outcome_unknown,
                fmt::format("{}: the connection to PostgreSQL at {} broke while the write was "
                            "out ({}), so whether it was stored is unknown. The next write "
                            "connects again; read what it wrote before building on it.",
                            doing, server_, (*connection)->last_error())};
}

// ---- users -------------------------------------------------------------------------------

Result<NewUser> PgStore::add_user(std::string_view name, std::int64_t weight) {
  if (Status s = check_user_name(name); !s.ok()) return s;
  if (Status s = check_weight(weight); !s.ok()) return s;
  auto made = new_key();
  if (!made.ok()) return made.status();
  std::string key = std::move(made->key);
  const Sha256& digest = made->digest;
  const std::string_view digest_bytes(reinterpret_cast<const char*>(digest.data()), digest.size());
  const std::array params{pg::Param::text(name), pg::Param::bytes(digest_bytes),
                          pg::Param::int64(weight), pg::Param::int64(to_ms(now()))};
  // One statement, committed (synchronously) before the key is shown.
  auto inserted = write(PgSql::insert_user, params, fmt::format("adding user '{}'", name));
  if (!inserted.ok()) {
    if (inserted.status().code() == StatusCode::already_exists) {
      return Status{StatusCode::already_exists,
                    fmt::format("a user named '{}' exists already: pick another name", name)};
    }
    return inserted.status();
  }
  return NewUser{User{inserted->int64(0, 0), std::string(name), weight}, std::move(key)};
}

Result<User> PgStore::find_user_by_key(std::string_view key) {
  const auto digest = sha256(key);
  if (!digest) return Status{StatusCode::internal, "SHA-256 of the key failed"};
  const std::array params{pg::Param::bytes(
      std::string_view(reinterpret_cast<const char*>(digest->data()), digest->size()))};
  return user_from(read(PgSql::user_by_key, params, "looking up a user by key"),
                   "user with this key");
}

Result<User> PgStore::find_user_by_name(std::string_view name) {
  const std::array params{pg::Param::text(name)};
  const std::string what = fmt::format("user named '{}'", name);
  return user_from(read(PgSql::user_by_name, params, "looking up a " + what), what);
}

Result<std::vector<User>> PgStore::users() {
  auto rows = read(PgSql::all_users, {}, "listing the users");
  if (!rows.ok()) return rows.status();
  std::vector<User> users;
  users.reserve(static_cast<std::size_t>(rows->size()));
  for (int row = 0; row < rows->size(); ++row) {
    users.push_back(
        User{rows->int64(row, 0), std::string(rows->text(row, 1)), rows->int64(row, 2)});
  }
  return users;
}

// ---- jobs --------------------------------------------------------------------------------

Result<EnqueuedJob> PgStore::enqueue_job(const JobRequest& request) {
  const auto shape = check_job_request(request);
  if (!shape.ok()) return shape.status();
  const auto public_suffix = random_hex(12);
  if (!public_suffix) return Status{StatusCode::internal, "the system's random generator failed"};
  const std::string public_id = "job_" + *public_suffix;
  const WallTime created_at = now();
  const auto page_count = static_cast<std::int64_t>(request.pages.size());
  std::optional<WallTime> promised_eta_at;
  if (request.promised_eta_s) {
    promised_eta_at =
        from_ms(to_ms(created_at + std::chrono::duration_cast<WallTime::duration>(
                                       std::chrono::duration<double>(*request.promised_eta_s))));
  }

  // The pages as columns, one array each.
  std::vector<std::int64_t> tokens;
  std::vector<std::optional<std::string_view>> kinds;
  std::vector<std::optional<std::string_view>> texts;
  std::vector<std::optional<std::string_view>> media_types;
  std::vector<std::optional<std::int64_t>> widths;
  std::vector<std::optional<std::int64_t>> heights;
  std::vector<std::optional<std::string_view>> images;
  for (const PageInput& page : request.pages) {
    tokens.push_back(page.estimated_tokens);
    kinds.emplace_back(to_string(page.kind));
    const bool is_image = page.kind == PageKind::image;
    texts.push_back(page.kind == PageKind::text ? std::optional<std::string_view>(page.text)
                                                : std::nullopt);
    media_types.push_back(is_image ? std::optional<std::string_view>(page.image->media_type)
                                   : std::nullopt);
    widths.push_back(is_image ? std::optional<std::int64_t>(page.image->width) : std::nullopt);
    heights.push_back(is_image ? std::optional<std::int64_t>(page.image->height) : std::nullopt);
    images.push_back(is_image ? std::optional<std::string_view>(page.image->bytes) : std::nullopt);
  }
  const std::array params{
      pg::Param::text(public_id),
      pg::Param::int64(request.user_id),
      pg::Param::text(request.name),
      pg::Param::int64(request.max_tokens),
      request.idempotency_key ? pg::Param::text(*request.idempotency_key) : pg::Param::null(),
      pg::Param::int64(page_count),
      pg::Param::int64(to_ms(created_at)),
      promised_eta_at ? pg::Param::int64(to_ms(*promised_eta_at)) : pg::Param::null(),
      pg::Param::int64(shape->blank),
      pg::Param::int64(shape->images),
      pg::Param::int64_array(tokens),
      pg::Param::text_array(kinds),
      pg::Param::text_array(texts),
      pg::Param::text_array(media_types),
      pg::Param::int64_array(widths),
      pg::Param::int64_array(heights),
      pg::Param::bytes_array(images),
      request.upload_head ? pg::Param::text(*request.upload_head) : pg::Param::null(),
      request.upload_digest ? pg::Param::text(*request.upload_digest) : pg::Param::null(),
  };
  auto rows = write(PgSql::enqueue_job, params, "enqueueing a job");
  if (!rows.ok()) {
    if (rows.status().code() == StatusCode::not_found) {
      return Status{StatusCode::not_found, fmt::format("no user with id {}", request.user_id)};
    }
    note(rows.status());
    return rows.status();
  }
  write_health_ = {};

  if (rows->size() == 0) {
    // The idempotency key named an earlier job of this user: that job, unchanged.
    const std::array key_params{pg::Param::int64(request.user_id),
                                pg::Param::text(view_of(request.idempotency_key).value_or(""))};
    auto earlier =
        read(PgSql::job_by_idempotency_key, key_params, "looking up the idempotency key");
    if (!earlier.ok()) return earlier.status();
    if (earlier->size() == 0) {
      return Status{StatusCode::internal,
                    "enqueueing a job: the job was neither written nor found"};
    }
    auto view = job(earlier->int64(0, 0));
    if (!view.ok()) return view.status();
    return EnqueuedJob{std::move(view).value(), false, {}};
  }

  const JobId job_id = rows->int64(0, 0);
  std::vector<LanePage> lane_pages;
  lane_pages.reserve(static_cast<std::size_t>(rows->size()));
  for (int row = 0; row < rows->size(); ++row) {
    if (rows->is_null(row, 2)) continue;  // every page blank
    const auto seq = static_cast<std::size_t>(rows->int64(row, 3));
    if (seq >= request.pages.size()) {
      return Status{StatusCode::internal,
                    "enqueueing a job: the server returned a page it was not sent"};
    }
    lane_pages.push_back(LanePage{rows->int64(row, 2), job_id, request.pages[seq].estimated_tokens,
                                  std::nullopt, 0});
  }

  JobView view;
  view.id = job_id;
  view.public_id = public_id;
  view.user_id = request.user_id;
  view.user_name = rows->text(0, 1);
  view.name = request.name;
  view.state = JobState::queued;
  view.pages.total = page_count;
  view.pages.queued = page_count - shape->blank;
  view.pages.done = view.pages.blank = shape->blank;
  view.pages.images = shape->images;
  view.max_tokens = request.max_tokens;
  view.created_at = from_ms(to_ms(created_at));
  if (shape->blank == page_count) {
    view.state = JobState::done;
    view.finished_at = view.created_at;
  }
  view.promised_eta_at = promised_eta_at;
  return EnqueuedJob{std::move(view), true, std::move(lane_pages)};
}

Result<std::vector<Lane>> PgStore::load_lanes() {
  // Fenced as a batch of transitions is: an instance that claimed the lease and stalled past
  // it must not requeue the pages the leader of the moment has in flight.
  const std::array requeue_params{pg::Param::int64(to_ms(now())), pg::Param::text(fence_instance_),
                                  pg::Param::int64(fence_epoch_)};
  auto requeued =
      write(PgSql::requeue_in_flight, requeue_params, "returning in-flight pages to their lanes");
  if (!requeued.ok()) {
    note(requeued.status());
    return requeued.status();
  }
  write_health_ = {};
  return read_lanes();
}

Result<std::vector<Lane>> PgStore::read_lanes() {
  auto rows = read(PgSql::queued_pages, {}, "reading the lanes");
  if (!rows.ok()) return rows.status();
  std::vector<Lane> lanes;
  for (int row = 0; row < rows->size(); ++row) {
    const UserId user = rows->int64(row, 0);
    if (lanes.empty() || lanes.back().user_id != user) {
      lanes.push_back(Lane{user, rows->int64(row, 1), {}});
    }
    lanes.back().pages.push_back(
        LanePage{rows->int64(row, 2), rows->int64(row, 3), rows->int64(row, 4),
                 from_ms(rows->optional_int64(row, 5)), rows->int64(row, 6)});
  }
  for (Lane& lane : lanes) lane.pages.shrink_to_fit();
  return lanes;
}

Result<JobView> PgStore::job(JobId job) {
  const std::array params{pg::Param::int64(job)};
  auto rows = read(PgSql::job_by_id, params, fmt::format("reading job {}", job));
  if (!rows.ok()) return rows.status();
  if (rows->size() == 0) return Status{StatusCode::not_found, fmt::format("no job {}", job)};
  return read_job(*rows, 0, options_.usd_per_million_tokens);
}

Result<std::vector<JobView>> PgStore::jobs(std::span<const JobId> ids) {
  const std::array params{pg::Param::int64_array(ids)};
  auto rows = read(PgSql::jobs_by_ids, params, fmt::format("reading {} jobs", ids.size()));
  if (!rows.ok()) return rows.status();
  std::vector<JobView> views;
  views.reserve(static_cast<std::size_t>(rows->size()));
  for (int row = 0; row < rows->size(); ++row) {
    views.push_back(read_job(*rows, row, options_.usd_per_million_tokens));
  }
  return views;
}

Result<JobView> PgStore::job_of(std::string_view public_id, UserId owner) {
  const std::array params{pg::Param::text(public_id), pg::Param::int64(owner)};
  auto rows = read(PgSql::job_by_public_id, params, fmt::format("reading job {}", public_id));
  if (!rows.ok()) return rows.status();
  if (rows->size() == 0) return Status{StatusCode::not_found, fmt::format("no job {}", public_id)};
  return read_job(*rows, 0, options_.usd_per_million_tokens);
}

Result<JobList> PgStore::jobs_of(UserId user, std::size_t limit,
                                 std::optional<std::string_view> cursor) {
  if (Status s = check_list_limit(limit); !s.ok()) return s;
  std::int64_t after = 0;
  if (cursor) {
    const std::array find_params{pg::Param::text(*cursor), pg::Param::int64(user)};
    auto found = read(PgSql::job_id_by_public_id, find_params, "reading the list cursor");
    if (!found.ok()) return found.status();
    if (found->size() == 0) {
      return unknown_cursor(*cursor);
    }
    after = found->int64(0, 0);
  }
  const std::array params{pg::Param::int64(user),
                          pg::Param::int64(static_cast<std::int64_t>(limit) + 1),
                          pg::Param::int64(after)};
  auto rows = read(PgSql::jobs_of, params, "listing jobs");
  if (!rows.ok()) return rows.status();
  JobList page;
  for (int row = 0; row < rows->size(); ++row) {
    page.jobs.push_back(read_job(*rows, row, options_.usd_per_million_tokens));
  }
  if (page.jobs.size() > limit) {
    page.jobs.pop_back();
    page.next_cursor = page.jobs.back().public_id;
  }
  return page;
}

Result<KeyedJob> PgStore::job_by_idempotency_key(UserId user, std::string_view key) {
  const std::array params{pg::Param::int64(user), pg::Param::text(key)};
  auto found = read(PgSql::job_by_idempotency_key, params, "looking up the idempotency key");
  if (!found.ok()) return found.status();
  if (found->size() == 0) return Status{StatusCode::not_found, "no job with this idempotency key"};
  KeyedJob keyed;
  const auto optional_text = [&](int column) -> std::optional<std::string> {
    if (found->is_null(0, column)) return std::nullopt;
    return std::string(found->text(0, column));
  };
  keyed.upload_head = optional_text(1);
  keyed.upload_digest = optional_text(2);
  auto view = job(found->int64(0, 0));
  if (!view.ok()) return view.status();
  keyed.job = std::move(view).value();
  return keyed;
}

Result<std::vector<PageResult>> PgStore::results_from(JobId job, std::int64_t from_seq,
                                                      std::int64_t limit) {
  const std::array params{pg::Param::int64(job), pg::Param::int64(from_seq),
                          pg::Param::int64(limit)};
  auto rows = read(PgSql::results, params, "reading the job's results");
  if (!rows.ok()) return rows.status();
  std::vector<PageResult> pages;
  pages.reserve(static_cast<std::size_t>(rows->size()));
  for (int row = 0; row < rows->size(); ++row) {
    PageResult page;
    page.seq = rows->int64(row, 0);
    page.state = page_state_from(rows->text(row, 1)).value_or(PageState::queued);
    if (!rows->is_null(row, 2)) page.output = std::string(rows->text(row, 2));
    if (!rows->is_null(row, 3)) page.error = std::string(rows->text(row, 3));
    page.usage = Usage{rows->int64(row, 4), rows->int64(row, 5)};
    page.attempts = rows->int64(row, 6);
    page.kind = page_kind_from(rows->text(row, 7)).value_or(PageKind::text);
    pages.push_back(std::move(page));
  }
  return pages;
}

Result<PageCall> PgStore::page_call(PageId page) {
  const std::array params{pg::Param::int64(page)};
  auto rows = read(PgSql::page_call, params, "reading a page's text");
  if (!rows.ok()) return rows.status();
  if (rows->size() == 0) return Status{StatusCode::not_found, fmt::format("no page {}", page)};
  PageCall call{std::string(rows->text(0, 1)), rows->int64(0, 2), std::nullopt};
  if (rows->text(0, 0) == "image" && !rows->is_null(0, 3)) {
    call.image = PageImage{std::string(rows->text(0, 3)), rows->int64(0, 4), rows->int64(0, 5),
                           rows->bytes(0, 6)};
  }
  return call;
}

Status PgStore::set_weight(std::string_view name, std::int64_t weight) {
  if (Status s = check_weight(weight); !s.ok()) return s;
  const std::array params{pg::Param::text(name), pg::Param::int64(weight)};
  auto updated = write(PgSql::set_weight, params, fmt::format("setting the weight of '{}'", name));
  if (!updated.ok()) return updated.status();
  if (updated->affected() == 0) {
    return Status{StatusCode::not_found, fmt::format("no user named '{}'", name)};
  }
  return {};
}

Status PgStore::revise_eta(JobId job, WallTime eta_at, std::string_view reason) {
  const std::array params{pg::Param::int64(job), pg::Param::int64(to_ms(eta_at)),
                          pg::Param::text(reason)};
  auto updated = write(PgSql::revise_eta, params, "recording a revised ETA");
  return updated.status();
}

Status PgStore::set_promise(JobId job, WallTime promised_eta_at) {
  const std::array params{pg::Param::int64(job), pg::Param::int64(to_ms(promised_eta_at))};
  auto updated = write(PgSql::set_promise, params, "recording a job's promise");
  return updated.status();
}

Result<std::vector<std::pair<UserId, std::int64_t>>> PgStore::in_flight_by_user() {
  auto rows = read(PgSql::in_flight_by_user, {}, "counting the pages in flight");
  if (!rows.ok()) return rows.status();
  std::vector<std::pair<UserId, std::int64_t>> counts;
  counts.reserve(static_cast<std::size_t>(rows->size()));
  for (int row = 0; row < rows->size(); ++row) {
    counts.emplace_back(rows->int64(row, 0), rows->int64(row, 1));
  }
  return counts;
}

Result<Spend> PgStore::recent_spend(std::chrono::milliseconds window) {
  const std::array params{pg::Param::int64(to_ms(now()) - window.count())};
  auto rows = read(PgSql::recent_spend, params, "reading recent spend");
  if (!rows.ok()) return rows.status();
  return Spend{rows->int64(0, 0), rows->int64(0, 1)};
}

Result<CallsOut> PgStore::calls_out(std::chrono::milliseconds window) {
  CallsOut out;
  const std::array params{pg::Param::int64(to_ms(now()) - window.count())};
  auto rows = read(PgSql::calls_out, params, "reading the calls still out");
  if (!rows.ok()) return rows.status();
  out.dispatched_at.reserve(static_cast<std::size_t>(rows->size()));
  for (int row = 0; row < rows->size(); ++row) {
    out.dispatched_at.emplace_back(std::chrono::milliseconds(rows->int64(row, 0)));
  }
  auto longest = read(PgSql::longest_call, params, "reading how long recent calls took");
  if (!longest.ok()) return longest.status();
  if (!longest->is_null(0, 0))
    out.longest_recent_call = std::chrono::milliseconds(longest->int64(0, 0));
  return out;
}

Result<std::vector<EndedCall>> PgStore::recent_calls(std::size_t limit) {
  const std::array params{pg::Param::int64(static_cast<std::int64_t>(limit))};
  auto rows = read(PgSql::recent_calls, params, "reading the calls that ended lately");
  if (!rows.ok()) return rows.status();
  std::vector<EndedCall> calls;
  calls.reserve(static_cast<std::size_t>(rows->size()));
  for (int row = rows->size() - 1; row >= 0; --row) {  // oldest first
    calls.push_back(EndedCall{rows->int64(row, 0), rows->int64(row, 1),
                              std::chrono::milliseconds(rows->int64(row, 2))});
  }
  return calls;
}

Result<RecentJobs> PgStore::recent_jobs(WallTime since, std::size_t limit) {
  RecentJobs out;
  auto first = read(PgSql::first_job_at, {}, "reading the first job");
  if (!first.ok()) return first.status();
  if (first->size() > 0) out.first_job_at = from_ms(first->optional_int64(0, 0));
  const std::array params{pg::Param::int64(to_ms(since)),
                          pg::Param::int64(static_cast<std::int64_t>(limit))};
  auto rows = read(PgSql::recent_jobs, params, "reading the jobs created lately");
  if (!rows.ok()) return rows.status();
  out.jobs.reserve(static_cast<std::size_t>(rows->size()));
  for (int row = 0; row < rows->size(); ++row) {
    out.jobs.push_back(ArrivedJob{rows->int64(row, 0), rows->int64(row, 1), rows->int64(row, 2),
                                  from_ms(rows->int64(row, 3)),
                                  from_ms(rows->optional_int64(row, 4))});
  }
  return out;
}

// ---- retention ---------------------------------------------------------------------------

Result<Pruned> PgStore::prune(WallTime finished_before, std::int64_t budget) {
  const std::array params{pg::Param::int64(to_ms(finished_before)), pg::Param::int64(budget),
                          pg::Param::int64(kPruneImageWeight)};
  auto rows = write(PgSql::prune, params, "pruning finished jobs");
  note(rows.status());
  if (!rows.ok()) return rows.status();
  if (rows->size() != 1) {
    return Status{StatusCode::internal, "pruning finished jobs: the server sent no answer"};
  }
  write_health_ = {};
  return Pruned{rows->int64(0, 0), rows->int64(0, 1), rows->int64(0, 2) != 0};
}

Result<Pruned> PgStore::prunable(WallTime finished_before) {
  const std::array params{pg::Param::int64(to_ms(finished_before))};
  auto rows = read(PgSql::prunable, params, "counting the jobs due to go");
  if (!rows.ok()) return rows.status();
  return Pruned{rows->int64(0, 0), rows->int64(0, 1), false};
}

// ---- page transitions --------------------------------------------------------------------

Result<std::vector<std::int64_t>> PgStore::apply(std::span<const PageTransition> transitions) {
  auto applied = apply_unnoted(transitions);
  note(applied.status());
  return applied;
}

Result<std::vector<std::int64_t>> PgStore::apply_unnoted(
    std::span<const PageTransition> transitions) {
  using Kind = PageTransition::Kind;
  // The batch as columns, one array each, element i being transition i's.
  std::vector<std::optional<std::string_view>> kinds;
  std::vector<std::int64_t> pages;
  std::vector<std::int64_t> jobs;
  std::vector<std::int64_t> reserved;
  std::vector<std::optional<std::string_view>> outputs;
  std::vector<std::int64_t> input_tokens;
  std::vector<std::int64_t> output_tokens;
  std::vector<std::optional<std::string_view>> errors;
  std::vector<std::optional<std::int64_t>> not_before;
  std::vector<std::int64_t> calls;
  for (const PageTransition& t : transitions) {
    std::string_view kind;
    switch (t.kind) {
      case Kind::dispatched:
        kind = "dispatched";
        break;
      case Kind::completed:
        kind = "completed";
        break;
      case Kind::attempt_failed:
        kind = "attempt_failed";
        break;
      case Kind::requeued:
        kind = "requeued";
        break;
      case Kind::failed:
        kind = "failed";
        break;
      case Kind::job_cancelled:
        kind = "job_cancelled";
        break;
    }
    if (kind.empty()) return Status{StatusCode::internal, "unknown page transition"};
    kinds.emplace_back(kind);
    pages.push_back(t.page_id);
    jobs.push_back(t.job_id);
    reserved.push_back(t.reserved_tokens);
    outputs.emplace_back(t.kind == Kind::completed ? std::optional<std::string_view>(t.output)
                                                   : std::nullopt);
    input_tokens.push_back(t.usage.input_tokens);
    output_tokens.push_back(t.usage.output_tokens);
    const bool has_error = t.kind == Kind::attempt_failed || t.kind == Kind::failed;
    errors.emplace_back(has_error ? std::optional<std::string_view>(t.error) : std::nullopt);
    not_before.push_back(t.not_before ? std::optional(to_ms(*t.not_before)) : std::nullopt);
    calls.push_back(t.call);
  }
  const WallTime at = now();
  // The fence (DESIGN.md section 10): fairlane_apply checks it against the lease row, in
  // this transaction and before it writes anything, so that a deposed leader's batch changes
  // nothing and fails with SQLSTATE FL001, fenced. That is an answer, not a lost connection:
  // note() does not count it against the health.
  const std::array params{
      pg::Param::text_array(kinds),          pg::Param::int64_array(pages),
      pg::Param::int64_array(jobs),          pg::Param::int64_array(reserved),
      pg::Param::text_array(outputs),        pg::Param::int64_array(input_tokens),
      pg::Param::int64_array(output_tokens), pg::Param::text_array(errors),
      pg::Param::int64_array(not_before),    pg::Param::int64_array(calls),
      pg::Param::int64(to_ms(at)),           pg::Param::int64(to_ms(at - kSpendRetention)),
      pg::Param::text(fence_instance_),      pg::Param::int64(fence_epoch_),
  };
  // One statement: one round trip and one transaction for the whole batch, committed
  // synchronously (a cancellation is acknowledged to its user).
  auto rows = write(PgSql::apply, params, "recording page transitions");
  if (!rows.ok()) return rows.status();
  if (rows->size() != 1) {
    return Status{StatusCode::internal, "recording page transitions: the server sent no answer"};
  }
  auto changed = parse_int64_array(rows->text(0, 0));
  if (!changed || changed->size() != transitions.size()) {
    return Status{StatusCode::internal,
                  fmt::format("recording page transitions: the server answered '{}' for {} "
                              "transitions",
                              rows->text(0, 0), transitions.size())};
  }
  write_health_ = {};
  return std::move(changed).value();
}

Result<std::int64_t> PgStore::cancel_job(JobId job) {
  auto exists = this->job(job);
  if (!exists.ok()) return exists.status();
  const PageTransition cancel = PageTransition::job_cancelled(job);
  auto changed = apply(std::span(&cancel, 1));
  if (!changed.ok()) return changed.status();
  return changed->front();
}

Status PgStore::write_health() const {
  return write_health_;
}

Status PgStore::probe_write() {
  auto probed = write(PgSql::probe_write, {}, "checking that the database can be written");
  Status status = probed.status();
  if (status.ok()) write_health_ = {};
  note(status);
  return status;
}

void PgStore::note(const Status& status) {
  const StatusCode code = status.code();
  if (code == StatusCode::disk_full || code == StatusCode::read_only ||
      code == StatusCode::io_error || code == StatusCode::outcome_unknown) {
    write_health_ = status;
  }
}

// ---- the cluster -------------------------------------------------------------------------

Result<LeaseState> PgStore::claim_lease(std::string_view instance,
                                        std::chrono::milliseconds lease) {
  if (instance.empty()) return invalid("claiming the lease: the instance has no name");
  if (lease <= std::chrono::milliseconds(0)) {
    return invalid(
        fmt::format("claiming the lease: a lease of {} ms is not positive", lease.count()));
  }
  const std::array params{pg::Param::text(instance), pg::Param::int64(lease.count())};
  const std::string doing = fmt::format("claiming the lease for '{}'", instance);
  // One statement: claimed, renewed or refused, under the row's lock (fairlane_claim_lease).
  auto rows = write(PgSql::claim_lease, params, doing);
  if (!rows.ok()) return rows.status();
  if (rows->size() != 1) {
    return Status{StatusCode::internal, fmt::format("{}: the server sent no answer", doing)};
  }
  LeaseState state;
  state.leader = std::string(rows->text(0, 0));
  state.epoch = rows->int64(0, 1);
  state.remaining = std::chrono::milliseconds(rows->int64(0, 2));
  state.held = state.leader == instance && state.remaining > std::chrono::milliseconds(0);
  return state;
}

Status PgStore::release_lease(std::string_view instance) {
  const std::array params{pg::Param::text(instance)};
  return write(PgSql::release_lease, params, fmt::format("giving up the lease of '{}'", instance))
      .status();
}

void PgStore::fence(std::string_view instance, std::int64_t epoch) {
  fence_instance_ = std::string(instance);
  fence_epoch_ = epoch;
}

Result<EnqueuedJob> PgStore::queued_job(JobId job) {
  const std::array params{pg::Param::int64(job)};
  auto rows =
      read(PgSql::queued_job, params, fmt::format("reading job {} and its queued pages", job));
  if (!rows.ok()) return rows.status();
  if (rows->size() == 0) return Status{StatusCode::not_found, fmt::format("no job {}", job)};
  // The job view's columns first (read_job), then the page's.
  constexpr int kPage = 23;
  EnqueuedJob queued{read_job(*rows, 0, options_.usd_per_million_tokens), true, {}};
  queued.pages.reserve(static_cast<std::size_t>(rows->size()));
  for (int row = 0; row < rows->size(); ++row) {
    if (rows->is_null(row, kPage)) continue;  // no page queued
    queued.pages.push_back(LanePage{rows->int64(row, kPage), job, rows->int64(row, kPage + 1),
                                    from_ms(rows->optional_int64(row, kPage + 2)),
                                    rows->int64(row, kPage + 3)});
  }
  return queued;
}

Result<std::vector<Lane>> PgStore::lanes_view() {
  return read_lanes();
}

}  // namespace fairlane::store
