// PgStore as the ClusterStore (src/store/pg_store.*, schema/pg/0003_cluster.sql): the
// leader's lease, the fence on page transitions, the notifications of jobs enqueued and
// changed, and a follower's reads; two stores (two instances) on one database of its own on
// the tests' server (CTest fixture `postgres`).
#include <doctest/doctest.h>
#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fairlane/store/cluster.hpp"
#include "store/pg.hpp"
#include "store/pg_store.hpp"
#include "support/pg.hpp"
#include "support/store.hpp"

using fairlane::EnqueuedJob;
using fairlane::JobRequest;
using fairlane::kJobChangedChannel;
using fairlane::kJobEnqueuedChannel;
using fairlane::PageInput;
using fairlane::PageKind;
using fairlane::PageTransition;
using fairlane::StatusCode;
using fairlane::StoreOptions;
using fairlane::store::PgStore;
using fairlane::store::pg::Connection;
using fairlane::testing::kNoPgServer;
using fairlane::testing::ManualWallClock;
using fairlane::testing::numbered_pages;
using fairlane::testing::pg_server_uri;
using fairlane::testing::PgTestDatabase;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

// Two instances' stores on one database, and a connection of the test's own beneath them.
struct Cluster {
  explicit Cluster(const std::string& server) : database(server) {
    a = open();
    b = open();
    auto raw_connection = Connection::open(database.uri());
    REQUIRE_MESSAGE(raw_connection.ok(), raw_connection.status().message());
    raw = std::make_unique<Connection>(std::move(raw_connection).value());
  }
  std::unique_ptr<PgStore> open() {
    StoreOptions options;
    options.wall_clock = clock.function();
    auto opened = PgStore::open(database.uri(), options);
    REQUIRE_MESSAGE(opened.ok(), opened.status().message());
    return std::move(opened).value();
  }
  std::int64_t number(const std::string& sql) const {
    auto rows = raw->query(sql, {}, "reading beneath the stores");
    REQUIRE_MESSAGE(rows.ok(), rows.status().message());
    REQUIRE(rows->size() == 1);
    return rows->int64(0, 0);
  }
  std::string text(const std::string& sql) const {
    auto rows = raw->query(sql, {}, "reading beneath the stores");
    REQUIRE_MESSAGE(rows.ok(), rows.status().message());
    REQUIRE(rows->size() == 1);
    return std::string(rows->text(0, 0));
  }
  void run(const std::string& sql) const {
    const auto status = raw->exec(sql, "changing beneath the stores");
    REQUIRE_MESSAGE(status.ok(), status.message());
  }
  // Ends the lease as if its holder had stopped renewing it, in the server's time.
  void expire_lease() const {
    run("UPDATE lease SET expires_at = clock_timestamp() - interval '1 second'");
  }
  std::string page_state(fairlane::PageId page) const {
    return text("SELECT state FROM pages WHERE id = " + std::to_string(page));
  }

  ManualWallClock clock;
  PgTestDatabase database;
  std::unique_ptr<PgStore> a;
  std::unique_ptr<PgStore> b;
  std::unique_ptr<Connection> raw;
};

JobRequest job_of(fairlane::UserId user, std::vector<PageInput> pages) {
  JobRequest request;
  request.user_id = user;
  request.name = "book.pdf";
  request.pages = std::move(pages);
  request.max_tokens = 500;
  return request;
}

// A connection of its own that LISTENs on both channels.
class Listener {
 public:
  explicit Listener(const std::string& uri) {
    auto opened = Connection::open(uri);
    REQUIRE_MESSAGE(opened.ok(), opened.status().message());
    connection_ = std::make_unique<Connection>(std::move(opened).value());
    const auto listening = connection_->exec("LISTEN " + std::string(kJobEnqueuedChannel) +
                                                 "; LISTEN " + std::string(kJobChangedChannel),
                                             "listening");
    REQUIRE_MESSAGE(listening.ok(), listening.message());
  }

  using Note = std::pair<std::string, std::string>;  // channel, payload

  // The notifications that arrive until `count` have or 5 s have passed, sorted.
  std::vector<Note> wait_for(std::size_t count) {
    std::vector<Note> notes;
    const auto deadline = std::chrono::steady_clock::now() + seconds(5);
    PGconn* conn = connection_->handle();
    while (true) {
      take(conn, notes);
      if (notes.size() >= count) break;
      const auto left =
          std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd fd{PQsocket(conn), POLLIN, 0};
      if (poll(&fd, 1, static_cast<int>(left.count())) <= 0) break;
      REQUIRE(PQconsumeInput(conn) == 1);
    }
    std::sort(notes.begin(), notes.end());
    return notes;
  }

  // Whatever arrived and was not taken yet: a round trip on this connection first, which the
  // server answers only after sending what it had to deliver.
  std::vector<Note> rest() {
    REQUIRE(connection_->exec("SELECT 1", "asking for what is left").ok());
    std::vector<Note> notes;
    take(connection_->handle(), notes);
    std::sort(notes.begin(), notes.end());
    return notes;
  }

 private:
  static void take(PGconn* conn, std::vector<Note>& notes) {
    while (PGnotify* note = PQnotifies(conn)) {
      notes.emplace_back(note->relname, note->extra);
      PQfreemem(note);
    }
  }

  std::unique_ptr<Connection> connection_;
};

Listener::Note enqueued(fairlane::JobId job) {
  return {std::string(kJobEnqueuedChannel), std::to_string(job)};
}
Listener::Note changed(fairlane::JobId job) {
  return {std::string(kJobChangedChannel), std::to_string(job)};
}

}  // namespace

TEST_CASE("PostgreSQL: the first claim of the lease gets epoch 1, and a renewal keeps it") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  Cluster c(*server);
  fairlane::Store& store = *c.a;
  CHECK(store.cluster() == c.a.get());
  CHECK(fairlane::testing::open_store(":memory:")->cluster() == nullptr);

  auto first = c.a->claim_lease("a", seconds(5));
  REQUIRE_MESSAGE(first.ok(), first.status().message());
  CHECK(first->held);
  CHECK(first->leader == "a");
  CHECK(first->epoch == 1);
  CHECK(first->remaining > milliseconds(0));
  CHECK(first->remaining <= seconds(5));

  auto renewed = c.a->claim_lease("a", seconds(60));
  REQUIRE_MESSAGE(renewed.ok(), renewed.status().message());
  CHECK(renewed->held);
  CHECK(renewed->leader == "a");
  CHECK(renewed->epoch == 1);
  CHECK(renewed->remaining > seconds(5));  // renewed for the new length from now
  CHECK(c.number("SELECT count(*) FROM lease") == 1);
  CHECK(c.number("SELECT epoch FROM lease") == 1);
  CHECK(c.number("SELECT (expires_at > clock_timestamp() + interval '50 seconds')::int "
                 "FROM lease") == 1);

  CHECK(c.a->claim_lease("", seconds(5)).status().code() == StatusCode::invalid_argument);
  CHECK(c.a->claim_lease("a", milliseconds(0)).status().code() == StatusCode::invalid_argument);
}

TEST_CASE("PostgreSQL: another instance cannot claim a held lease and is told who holds it") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  Cluster c(*server);
  REQUIRE(c.a->claim_lease("a", seconds(30)).ok());
  auto refused = c.b->claim_lease("b", seconds(30));
  REQUIRE_MESSAGE(refused.ok(), refused.status().message());
  CHECK_FALSE(refused->held);
  CHECK(refused->leader == "a");
  CHECK(refused->epoch == 1);
  CHECK(refused->remaining > milliseconds(0));
  CHECK(refused->remaining <= seconds(30));
  CHECK(c.text("SELECT holder FROM lease") == "a");
  CHECK(c.number("SELECT epoch FROM lease") == 1);
}

TEST_CASE("PostgreSQL: another instance claims an expired lease with the next epoch") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  Cluster c(*server);
  REQUIRE(c.a->claim_lease("a", seconds(30)).ok());
  c.expire_lease();
  auto taken = c.b->claim_lease("b", seconds(30));
  REQUIRE_MESSAGE(taken.ok(), taken.status().message());
  CHECK(taken->held);
  CHECK(taken->leader == "b");
  CHECK(taken->epoch == 2);
  // The deposed holder learns it, and cannot take the lease back nor give it up.
  auto deposed = c.a->claim_lease("a", seconds(30));
  REQUIRE(deposed.ok());
  CHECK_FALSE(deposed->held);
  CHECK(deposed->leader == "b");
  CHECK(deposed->epoch == 2);
  CHECK(c.a->release_lease("a").ok());
  CHECK(c.b->claim_lease("b", seconds(30))->epoch == 2);
  // An instance whose own lease ran out with nobody taking it over keeps its epoch.
  c.expire_lease();
  auto again = c.b->claim_lease("b", seconds(30));
  REQUIRE(again.ok());
  CHECK(again->held);
  CHECK(again->epoch == 2);
}

TEST_CASE("PostgreSQL: of two instances claiming the lease at once, exactly one gets it") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  Cluster c(*server);
  const fairlane::Status not_run{StatusCode::internal, "not run"};
  for (int round = 0; round < 10; ++round) {
    CAPTURE(round);
    c.run("DELETE FROM lease");
    fairlane::Result<fairlane::LeaseState> by_a = not_run;
    fairlane::Result<fairlane::LeaseState> by_b = not_run;
    {
      // Each store on a thread of its own, as two processes would.
      std::jthread other([&] { by_b = c.b->claim_lease("b", seconds(30)); });
      by_a = c.a->claim_lease("a", seconds(30));
    }
    REQUIRE_MESSAGE(by_a.ok(), by_a.status().message());
    REQUIRE_MESSAGE(by_b.ok(), by_b.status().message());
    CHECK(by_a->held != by_b->held);
    CHECK(by_a->leader == by_b->leader);
    CHECK(by_a->epoch == 1);
    CHECK(by_b->epoch == 1);
  }
}

TEST_CASE(
    "PostgreSQL: a deposed leader's batch is fenced, changes nothing, and the store goes on") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  Cluster c(*server);
  const auto ann = c.a->add_user("ann", 1).value();
  const auto job = c.a->enqueue_job(job_of(ann.user.id, numbered_pages(2))).value();
  const auto p0 = job.pages[0].page_id;
  const auto p1 = job.pages[1].page_id;

  // Fenced before anyone claimed the lease: nobody leads.
  c.a->fence("a", 1);
  const auto unclaimed = c.a->apply(std::vector{PageTransition::dispatched(p0, 300)});
  REQUIRE_FALSE(unclaimed.ok());
  CHECK(unclaimed.status().code() == StatusCode::fenced);
  CHECK(c.page_state(p0) == "queued");

  REQUIRE(c.a->claim_lease("a", seconds(30))->epoch == 1);
  const auto led = c.a->apply(std::vector{PageTransition::dispatched(p0, 300)});
  REQUIRE_MESSAGE(led.ok(), led.status().message());
  CHECK(*led == std::vector<std::int64_t>{1});

  c.expire_lease();
  REQUIRE(c.b->claim_lease("b", seconds(30))->epoch == 2);
  c.b->fence("b", 2);
  const auto before = c.a->round_trips();
  const auto fenced = c.a->apply(std::vector{
      PageTransition::completed(p0, "late", fairlane::Usage{1, 2}, 1),
      PageTransition::dispatched(p1, 300),
  });
  REQUIRE_FALSE(fenced.ok());
  CHECK(fenced.status().code() == StatusCode::fenced);
  CHECK(fenced.status().message().find("no longer leads") != std::string::npos);
  CHECK(fenced.status().message().find("b leads it (epoch 2)") != std::string::npos);
  CHECK(c.a->round_trips() == before + 1);
  // Nothing of the batch was written.
  CHECK(c.page_state(p0) == "in_flight");
  CHECK(c.page_state(p1) == "queued");
  CHECK(c.number("SELECT count(*) FROM spend") == 1);
  CHECK(c.number("SELECT count(*) FROM spend WHERE ended_at IS NOT NULL") == 0);
  CHECK(c.number("SELECT in_flight FROM jobs") == 1);
  // Fenced is not a lost connection: the store is neither broken nor unhealthy.
  CHECK(c.a->write_health().ok());
  CHECK(c.a->job(job.job.id).ok());
  CHECK(c.a->probe_write().ok());
  auto next = c.a->enqueue_job(job_of(ann.user.id, numbered_pages(1)));
  CHECK_MESSAGE(next.ok(), next.status().message());
  // The new leader writes; the old one, unfenced again, would too (tests, a single node).
  const auto done =
      c.b->apply(std::vector{PageTransition::completed(p0, "one", fairlane::Usage{1, 2}, 1)});
  REQUIRE_MESSAGE(done.ok(), done.status().message());
  CHECK(*done == std::vector<std::int64_t>{1});
  CHECK(c.page_state(p0) == "done");

  // A leader whose lease ran out, nobody having taken it, is fenced until it renews it.
  c.expire_lease();
  const auto expired = c.b->apply(std::vector{PageTransition::dispatched(p1, 300)});
  REQUIRE_FALSE(expired.ok());
  CHECK(expired.status().code() == StatusCode::fenced);
  CHECK(expired.status().message().find("expired") != std::string::npos);
  CHECK(c.page_state(p1) == "queued");
  REQUIRE(c.b->claim_lease("b", seconds(30))->epoch == 2);
  CHECK(c.b->apply(std::vector{PageTransition::dispatched(p1, 300)}).ok());
  CHECK(c.page_state(p1) == "in_flight");

  c.a->fence("a", 0);
  CHECK(c.a->apply(std::vector{PageTransition::failed(p1, "gave up", 1)}).ok());
  CHECK(c.page_state(p1) == "failed");
}

TEST_CASE(
    "PostgreSQL: a deposed instance's takeover is fenced and leaves the leader's pages in "
    "flight") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  Cluster c(*server);
  const auto ann = c.a->add_user("ann", 1).value();
  const auto job = c.a->enqueue_job(job_of(ann.user.id, numbered_pages(2))).value();
  const auto p0 = job.pages[0].page_id;

  // a claimed the lease, then stalled past it; b took it over and has a page in flight.
  REQUIRE(c.a->claim_lease("a", seconds(30))->epoch == 1);
  c.a->fence("a", 1);
  c.expire_lease();
  REQUIRE(c.b->claim_lease("b", seconds(30))->epoch == 2);
  c.b->fence("b", 2);
  REQUIRE(c.b->apply(std::vector{PageTransition::dispatched(p0, 300)}).ok());

  // a wakes and starts leading: its requeue is refused, and b's page stays in flight (it
  // would have gone back to queued, where b's completion would have found it and changed
  // nothing).
  const auto stale = c.a->load_lanes();
  REQUIRE_FALSE(stale.ok());
  CHECK(stale.status().code() == StatusCode::fenced);
  CHECK(stale.status().message().find("b leads it (epoch 2)") != std::string::npos);
  CHECK(c.page_state(p0) == "in_flight");
  CHECK(c.a->write_health().ok());
  const auto done =
      c.b->apply(std::vector{PageTransition::completed(p0, "one", fairlane::Usage{1, 2}, 1)});
  REQUIRE(done.ok());
  CHECK(*done == std::vector<std::int64_t>{1});

  // The leader's own takeover goes through, and an unfenced store (a single node) requeues.
  REQUIRE(c.b->apply(std::vector{PageTransition::dispatched(job.pages[1].page_id, 300)}).ok());
  const auto lanes = c.b->load_lanes();
  REQUIRE_MESSAGE(lanes.ok(), lanes.status().message());
  REQUIRE(lanes->size() == 1);
  CHECK(lanes->front().pages.size() == 1);
  CHECK(c.page_state(job.pages[1].page_id) == "queued");
  c.a->fence("", 0);
  CHECK(c.a->load_lanes().ok());
}

namespace {

// Waits (up to 10 s) until `count` server processes of the database other than `watch`'s
// wait on a lock; whether they did.
bool lock_waiters(Connection& watch, std::int64_t count) {
  const auto give_up = std::chrono::steady_clock::now() + seconds(10);
  while (std::chrono::steady_clock::now() < give_up) {
    auto rows = watch.query(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()",
        {}, "counting the waiters");
    REQUIRE(rows.ok());
    if (rows->int64(0, 0) >= count) return true;
  }
  return false;
}

// A cluster where a leads (epoch 1) and ann has a job of two pages, and a connection of the
// test's own to count the waiters on locks with.
struct LedJob {
  explicit LedJob(Cluster& c)
      : watch(opened(c.database.uri())),
        job(c.a->enqueue_job(job_of(c.a->add_user("ann", 1).value().user.id, numbered_pages(2)))
                .value()),
        p0(job.pages[0].page_id) {
    REQUIRE(c.a->claim_lease("a", seconds(30))->epoch == 1);
    c.a->fence("a", 1);
  }
  static Connection opened(const std::string& uri) {
    auto connection = Connection::open(uri);
    REQUIRE_MESSAGE(connection.ok(), connection.status().message());
    return std::move(connection).value();
  }

  Connection watch;
  EnqueuedJob job;
  fairlane::PageId p0 = 0;
};

}  // namespace

TEST_CASE(
    "PostgreSQL: a page requeued while another instance cancels its job ends cancelled, not "
    "queued") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  Cluster c(*server);
  LedJob led(c);
  auto& [watch, job, p0] = led;
  REQUIRE(c.a->apply(std::vector{PageTransition::dispatched(p0, 300)}).ok());

  // The test holds the page in flight, so that the leader's requeue of it (a 429, say)
  // waits with its statement begun; meanwhile b cancels the job (a user asked b).
  c.run("BEGIN; SELECT 1 FROM pages WHERE id = " + std::to_string(p0) + " FOR UPDATE");
  fairlane::Result<std::vector<std::int64_t>> requeued =
      fairlane::Status{StatusCode::internal, "not run"};
  std::thread leader([&] { requeued = c.a->apply(std::vector{PageTransition::requeued(p0, 1)}); });
  REQUIRE(lock_waiters(watch, 1));
  fairlane::Result<std::int64_t> cancelled = fairlane::Status{StatusCode::internal, "not run"};
  std::thread follower([&] { cancelled = c.b->cancel_job(job.job.id); });
  // The cancellation either commits at once (it touches no page in flight) or waits for
  // the leader's batch (which holds the job): either way, then the page is let go.
  (void)lock_waiters(watch, 2);
  c.run("ROLLBACK");
  leader.join();
  follower.join();
  REQUIRE_MESSAGE(requeued.ok(), requeued.status().message());
  REQUIRE_MESSAGE(cancelled.ok(), cancelled.status().message());

  // Before, the requeue read the job as it was when its statement began (not cancelled) and
  // put the page back in the queue after the cancellation had cancelled the queued ones: a
  // page of a cancelled job left queued, which the next leader would have sent.
  CHECK(c.page_state(p0) == "cancelled");
  CHECK(c.page_state(job.pages[1].page_id) == "cancelled");
  CHECK(c.number("SELECT queued + in_flight FROM jobs") == 0);
  CHECK(c.number("SELECT count(*) FROM jobs WHERE finished_at IS NOT NULL") == 1);
}

TEST_CASE(
    "PostgreSQL: a takeover's requeue of a page in flight sees a cancellation committed while it "
    "waited") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  Cluster c(*server);
  LedJob led(c);
  auto& [watch, job, p0] = led;
  REQUIRE(c.a->apply(std::vector{PageTransition::dispatched(p0, 300)}).ok());
  // a dies with p0 out; b takes over.
  c.expire_lease();
  REQUIRE(c.b->claim_lease("b", seconds(30))->epoch == 2);
  c.b->fence("b", 2);
  const auto follower = c.open();  // where the job's owner asks to cancel it

  // The test holds the page in flight, so that b's requeue of it waits with its statement
  // begun; meanwhile the owner cancels the job on another instance.
  c.run("BEGIN; SELECT 1 FROM pages WHERE id = " + std::to_string(p0) + " FOR UPDATE");
  fairlane::Result<std::vector<fairlane::Lane>> lanes =
      fairlane::Status{StatusCode::internal, "not run"};
  std::thread takeover([&] { lanes = c.b->load_lanes(); });
  REQUIRE(lock_waiters(watch, 1));
  fairlane::Result<std::int64_t> cancelled = fairlane::Status{StatusCode::internal, "not run"};
  std::thread owner([&] { cancelled = follower->cancel_job(job.job.id); });
  // The requeue holds the job (it locked it first): the cancellation waits for it.
  CHECK(lock_waiters(watch, 2));
  c.run("ROLLBACK");
  takeover.join();
  owner.join();
  REQUIRE_MESSAGE(lanes.ok(), lanes.status().message());
  REQUIRE_MESSAGE(cancelled.ok(), cancelled.status().message());

  // Without the lock, the requeue read the job as it was when its statement began (not
  // cancelled) and put the page back in the queue after the cancellation had cancelled the
  // queued ones: a page of a cancelled job left queued, which the new leader would send.
  CHECK(c.page_state(p0) == "cancelled");
  CHECK(c.page_state(job.pages[1].page_id) == "cancelled");
  CHECK(c.number("SELECT queued + in_flight FROM jobs") == 0);
}

TEST_CASE("PostgreSQL: a dispatch and another instance's cancellation of its job do not deadlock") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  Cluster c(*server);
  LedJob led(c);
  auto& [watch, job, p0] = led;

  // The test holds the job, so that b's cancellation waits for it first, then a's dispatch
  // of the job's page. Before, the dispatch locked the page and then waited for the job (to
  // count it), while the cancellation, holding the job once let go, waited for the page:
  // PostgreSQL broke the deadlock after a second by failing one of them.
  c.run("BEGIN; SELECT 1 FROM jobs WHERE id = " + std::to_string(job.job.id) + " FOR UPDATE");
  fairlane::Result<std::int64_t> cancelled = fairlane::Status{StatusCode::internal, "not run"};
  std::thread follower([&] { cancelled = c.b->cancel_job(job.job.id); });
  REQUIRE(lock_waiters(watch, 1));
  fairlane::Result<std::vector<std::int64_t>> dispatched =
      fairlane::Status{StatusCode::internal, "not run"};
  std::thread leader(
      [&] { dispatched = c.a->apply(std::vector{PageTransition::dispatched(p0, 300)}); });
  REQUIRE(lock_waiters(watch, 2));
  c.run("ROLLBACK");
  leader.join();
  follower.join();
  REQUIRE_MESSAGE(cancelled.ok(), cancelled.status().message());
  REQUIRE_MESSAGE(dispatched.ok(), dispatched.status().message());
  // The cancellation went first: the page was cancelled, and its dispatch changed nothing.
  CHECK(*cancelled == 2);
  CHECK(*dispatched == std::vector<std::int64_t>{0});
  CHECK(c.page_state(p0) == "cancelled");
  CHECK(c.number("SELECT queued + in_flight FROM jobs") == 0);
}

TEST_CASE(
    "PostgreSQL: two instances taking one user's uploads at once give each job one stretch of "
    "page ids") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  Cluster c(*server);
  auto watch = Connection::open(c.database.uri());
  REQUIRE(watch.ok());
  const auto ann = c.a->add_user("ann", 1).value();
  constexpr int kPages = 2'000;
  // The test holds the user's row, which each upload's job refers to, so that both wait and
  // are let go together, drawing their page ids at once.
  c.run("BEGIN; SELECT 1 FROM users WHERE id = " + std::to_string(ann.user.id) + " FOR UPDATE");
  fairlane::Result<EnqueuedJob> first = fairlane::Status{StatusCode::internal, "not run"};
  fairlane::Result<EnqueuedJob> second = fairlane::Status{StatusCode::internal, "not run"};
  std::thread one([&] { first = c.a->enqueue_job(job_of(ann.user.id, numbered_pages(kPages))); });
  std::thread two([&] { second = c.b->enqueue_job(job_of(ann.user.id, numbered_pages(kPages))); });
  REQUIRE(lock_waiters(*watch, 2));
  c.run("ROLLBACK");
  one.join();
  two.join();
  REQUIRE_MESSAGE(first.ok(), first.status().message());
  REQUIRE_MESSAGE(second.ok(), second.status().message());

  // Each job's pages are one stretch of ids, in page order, and one job's stretch comes
  // wholly before the other's: the user's lane holds each job in one piece, in page-id
  // order (FairScheduler), whoever reads it. Before, both drew from the sequence at once.
  const auto stretch = [](const EnqueuedJob& job) {
    for (std::size_t i = 1; i < job.pages.size(); ++i) {
      if (job.pages[i].page_id != job.pages[i - 1].page_id + 1) return false;
    }
    return true;
  };
  CHECK(stretch(*first));
  CHECK(stretch(*second));
  const auto lanes = c.a->lanes_view();
  REQUIRE(lanes.ok());
  REQUIRE(lanes->size() == 1);
  const auto& pages = lanes->front().pages;
  REQUIRE(pages.size() == 2 * kPages);
  std::size_t job_changes = 0;
  for (std::size_t i = 1; i < pages.size(); ++i) {
    if (pages[i].job_id != pages[i - 1].job_id) ++job_changes;
  }
  CHECK(job_changes == 1);
}

TEST_CASE("PostgreSQL: a batch of cancellations goes through from an unfenced or deposed store") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  Cluster c(*server);
  const auto ann = c.a->add_user("ann", 1).value();
  std::vector<EnqueuedJob> jobs;
  for (int i = 0; i < 4; ++i) {
    jobs.push_back(c.a->enqueue_job(job_of(ann.user.id, numbered_pages(2))).value());
  }
  REQUIRE(c.a->claim_lease("a", seconds(30))->held);
  c.a->fence("a", 1);
  // b follows, unfenced: a user's cancellation is written by whichever instance they asked.
  auto by_follower = c.b->cancel_job(jobs[0].job.id);
  REQUIRE_MESSAGE(by_follower.ok(), by_follower.status().message());
  CHECK(*by_follower == 2);

  c.expire_lease();
  REQUIRE(c.b->claim_lease("b", seconds(30))->held);
  auto by_deposed = c.a->cancel_job(jobs[1].job.id);
  REQUIRE_MESSAGE(by_deposed.ok(), by_deposed.status().message());
  CHECK(*by_deposed == 2);
  auto batch = c.a->apply(std::vector{PageTransition::job_cancelled(jobs[2].job.id),
                                      PageTransition::job_cancelled(jobs[2].job.id)});
  REQUIRE_MESSAGE(batch.ok(), batch.status().message());
  CHECK(*batch == std::vector<std::int64_t>{2, 0});
  // A batch with anything else in it is fenced whole, its cancellation too.
  auto mixed = c.a->apply(std::vector{PageTransition::job_cancelled(jobs[3].job.id),
                                      PageTransition::dispatched(jobs[3].pages[0].page_id, 1)});
  CHECK(mixed.status().code() == StatusCode::fenced);
  CHECK(c.number("SELECT cancelled FROM jobs WHERE id = " + std::to_string(jobs[3].job.id)) == 0);
  CHECK(c.number("SELECT count(*) FROM pages WHERE state = 'cancelled'") == 6);
}

TEST_CASE("PostgreSQL: a released lease is claimed by another instance at once") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  Cluster c(*server);
  REQUIRE(c.a->claim_lease("a", seconds(60))->held);
  REQUIRE_FALSE(c.b->claim_lease("b", seconds(60))->held);
  REQUIRE(c.a->release_lease("a").ok());
  auto taken = c.b->claim_lease("b", seconds(60));
  REQUIRE_MESSAGE(taken.ok(), taken.status().message());
  CHECK(taken->held);
  CHECK(taken->epoch == 2);
  // Releasing a lease one does not hold changes nothing.
  REQUIRE(c.a->release_lease("a").ok());
  CHECK(c.b->claim_lease("b", seconds(60))->held);
  CHECK_FALSE(c.a->claim_lease("a", seconds(60))->held);
  REQUIRE(c.b->release_lease("b").ok());
  auto back = c.a->claim_lease("a", seconds(60));
  REQUIRE(back.ok());
  CHECK(back->held);
  CHECK(back->epoch == 3);
}

TEST_CASE("PostgreSQL: enqueue, a batch, a cancellation and a revised ETA notify their jobs") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  Cluster c(*server);
  Listener listener(c.database.uri());
  const auto ann = c.a->add_user("ann", 1).value();

  auto request = job_of(ann.user.id, numbered_pages(2));
  request.idempotency_key = "upload-1";
  auto before = c.a->round_trips();
  const auto one = c.a->enqueue_job(request).value();
  CHECK(c.a->round_trips() == before + 1);
  CHECK(listener.wait_for(1) == std::vector{enqueued(one.job.id)});
  // The same key again creates nothing, and notifies nothing.
  CHECK_FALSE(c.a->enqueue_job(request).value().created);
  const auto two = c.a->enqueue_job(job_of(ann.user.id, numbered_pages(2))).value();
  CHECK(listener.wait_for(1) == std::vector{enqueued(two.job.id)});

  before = c.a->round_trips();
  const auto applied = c.a->apply(std::vector{
      PageTransition::dispatched(one.pages[0].page_id, 100),
      PageTransition::dispatched(one.pages[1].page_id, 100),
      PageTransition::dispatched(two.pages[0].page_id, 100),
      PageTransition::completed(one.pages[0].page_id, "out", fairlane::Usage{1, 1}, 1),
  });
  REQUIRE_MESSAGE(applied.ok(), applied.status().message());
  CHECK(c.a->round_trips() == before + 1);
  // Once per job the batch changed.
  CHECK(listener.wait_for(2) == std::vector{changed(one.job.id), changed(two.job.id)});

  REQUIRE(c.b->cancel_job(two.job.id).ok());
  CHECK(listener.wait_for(1) == std::vector{changed(two.job.id)});
  REQUIRE(c.b->revise_eta(one.job.id, c.clock.now + seconds(90), "slower").ok());
  CHECK(listener.wait_for(1) == std::vector{changed(one.job.id)});

  // A batch that changes nothing (a second answer), and a fenced one, notify nothing.
  REQUIRE(c.a->apply(std::vector{PageTransition::completed(one.pages[0].page_id, "again",
                                                           fairlane::Usage{1, 1}, 1)})
              .ok());
  c.a->fence("a", 1);
  CHECK(c.a->apply(std::vector{PageTransition::failed(one.pages[1].page_id, "no", 1)})
            .status()
            .code() == StatusCode::fenced);
  CHECK(listener.rest().empty());
}

TEST_CASE("PostgreSQL: queued_job reads a job and its queued pages in lane order") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  Cluster c(*server);
  const auto ann = c.a->add_user("ann", 1).value();
  std::vector<PageInput> pages = numbered_pages(3, 40);
  pages.push_back(PageInput{"", 0, PageKind::blank, std::nullopt});
  pages.push_back(PageInput{"page 5", 50, PageKind::text, std::nullopt});
  const auto job = c.a->enqueue_job(job_of(ann.user.id, pages)).value();
  REQUIRE(job.pages.size() == 4);

  // Another instance reads what this one accepted, as enqueue_job returned it.
  auto before = c.b->round_trips();
  auto read = c.b->queued_job(job.job.id);
  REQUIRE_MESSAGE(read.ok(), read.status().message());
  CHECK(c.b->round_trips() == before + 1);
  CHECK(read->created);
  CHECK(read->job.id == job.job.id);
  CHECK(read->job.public_id == job.job.public_id);
  CHECK(read->job.user_name == "ann");
  CHECK(read->job.pages.total == 5);
  CHECK(read->job.pages.queued == 4);
  REQUIRE(read->pages.size() == job.pages.size());
  for (std::size_t i = 0; i < job.pages.size(); ++i) {
    CAPTURE(i);
    CHECK(read->pages[i].page_id == job.pages[i].page_id);
    CHECK(read->pages[i].job_id == job.job.id);
    CHECK(read->pages[i].estimated_tokens == job.pages[i].estimated_tokens);
    CHECK_FALSE(read->pages[i].not_before.has_value());
    CHECK(read->pages[i].attempts == 0);
  }
  CHECK(read->pages[3].estimated_tokens == 50);

  // Only queued pages: one in flight and one done are not in it.
  REQUIRE(c.a->apply(std::vector{PageTransition::dispatched(job.pages[0].page_id, 40),
                                 PageTransition::dispatched(job.pages[2].page_id, 40),
                                 PageTransition::completed(job.pages[2].page_id, "three",
                                                           fairlane::Usage{1, 1}, 1)})
              .ok());
  auto later = c.b->queued_job(job.job.id);
  REQUIRE(later.ok());
  CHECK(later->job.pages.in_flight == 1);
  REQUIRE(later->pages.size() == 2);
  CHECK(later->pages[0].page_id == job.pages[1].page_id);
  CHECK(later->pages[1].page_id == job.pages[3].page_id);

  std::vector<PageInput> blank(2, PageInput{"", 0, PageKind::blank, std::nullopt});
  const auto all_blank = c.a->enqueue_job(job_of(ann.user.id, blank)).value();
  auto none = c.b->queued_job(all_blank.job.id);
  REQUIRE(none.ok());
  CHECK(none->pages.empty());
  CHECK(none->job.state == fairlane::JobState::done);
  CHECK(c.b->queued_job(999'999).status().code() == StatusCode::not_found);
}

TEST_CASE("PostgreSQL: lanes_view reads the lanes and leaves pages in flight in flight") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  Cluster c(*server);
  const auto ann = c.a->add_user("ann", 1).value();
  const auto bo = c.a->add_user("bo", 4).value();
  const auto a = c.a->enqueue_job(job_of(ann.user.id, numbered_pages(3))).value();
  const auto b = c.a->enqueue_job(job_of(bo.user.id, numbered_pages(2))).value();
  REQUIRE(c.a->apply(std::vector{PageTransition::dispatched(a.pages[0].page_id, 100)}).ok());
  c.run("UPDATE pages SET attempts = 2, not_before = 1800000005000 WHERE id = " +
        std::to_string(a.pages[1].page_id));

  const auto before = c.b->round_trips();
  auto view = c.b->lanes_view();
  REQUIRE_MESSAGE(view.ok(), view.status().message());
  CHECK(c.b->round_trips() == before + 1);
  REQUIRE(view->size() == 2);
  CHECK((*view)[0].user_id == ann.user.id);
  CHECK((*view)[0].weight == 1);
  REQUIRE((*view)[0].pages.size() == 2);  // the page in flight is not in its lane
  CHECK((*view)[0].pages[0].page_id == a.pages[1].page_id);
  CHECK((*view)[0].pages[0].attempts == 2);
  CHECK((*view)[0].pages[0].not_before == fairlane::WallTime(milliseconds(1'800'000'005'000)));
  CHECK((*view)[0].pages[1].page_id == a.pages[2].page_id);
  CHECK((*view)[1].user_id == bo.user.id);
  CHECK((*view)[1].weight == 4);
  REQUIRE((*view)[1].pages.size() == 2);
  CHECK((*view)[1].pages[0].page_id == b.pages[0].page_id);
  CHECK((*view)[1].pages[0].job_id == b.job.id);
  // Nothing changed: the page is still in flight, as load_lanes() would not leave it.
  CHECK(c.page_state(a.pages[0].page_id) == "in_flight");
  CHECK(c.number("SELECT in_flight FROM jobs WHERE id = " + std::to_string(a.job.id)) == 1);
  auto loaded = c.a->load_lanes();
  REQUIRE(loaded.ok());
  REQUIRE((*loaded)[0].pages.size() == 3);
  CHECK((*loaded)[0].pages[0].page_id == a.pages[0].page_id);
}
