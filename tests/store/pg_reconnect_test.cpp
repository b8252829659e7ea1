// PgStore's connection when it breaks (docs/postgresql.md, "Connections that break"), on a
// database of its own on the tests' server (CTest fixture `postgres`): the server ends the
// store's connection (pg_terminate_backend, as a restart or a failover does) while it is idle,
// while a read waits and while a write waits, and the database goes away and comes back; and
// a server that goes silent (tests/support/tcp_proxy.hpp) does not hold the store's caller.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "store/pg.hpp"
#include "store/pg_store.hpp"
#include "support/pg.hpp"
#include "support/store.hpp"
#include "support/tcp_proxy.hpp"

using namespace std::chrono_literals;
using fairlane::JobRequest;
using fairlane::PageTransition;
using fairlane::StatusCode;
using fairlane::StoreOptions;
using fairlane::store::PgStore;
using fairlane::store::pg::Connection;
using fairlane::store::pg::Param;
using fairlane::testing::kNoPgServer;
using fairlane::testing::ManualWallClock;
using fairlane::testing::numbered_pages;
using fairlane::testing::pg_server_uri;
using fairlane::testing::PgTestDatabase;
using fairlane::testing::TcpProxy;

namespace {

Connection connect(const std::string& uri) {
  auto opened = Connection::open(uri);
  REQUIRE_MESSAGE(opened.ok(), opened.status().message());
  return std::move(opened).value();
}

// A store on a database of its own, a user with a job of `pages` pages, and two connections of
// the test's own: one to look beneath and lock, one to watch the server's processes and end
// the store's (outside any transaction: pg_stat_activity is read once per transaction).
struct Fixture {
  // `connect_wait`: StoreOptions::connect_wait. Most cases here expect the call after a cut
  // to see its reconnect through, and wait long.
  explicit Fixture(const std::string& server_uri, int pages = 2,
                   std::chrono::milliseconds connect_wait = 60s)
      : server(server_uri),
        database(server_uri),
        raw(connect(database.uri())),
        watch(connect(database.uri())) {
    StoreOptions options;
    options.wall_clock = clock.function();
    options.connect_wait = connect_wait;
    auto opened = PgStore::open(database.uri(), options);
    REQUIRE_MESSAGE(opened.ok(), opened.status().message());
    store = std::move(opened).value();
    const auto user = store->add_user("ann", 1);
    REQUIRE(user.ok());
    auto made = store->enqueue_job(JobRequest{user->user.id, "book", numbered_pages(pages), 500});
    REQUIRE_MESSAGE(made.ok(), made.status().message());
    job = std::move(made).value();
  }

  std::int64_t number(const std::string& sql) {
    auto rows = watch.query(sql, {}, "reading beneath the store");
    REQUIRE_MESSAGE(rows.ok(), rows.status().message());
    REQUIRE(rows->size() == 1);
    return rows->int64(0, 0);
  }
  void run(const std::string& sql) {
    const auto status = raw.exec(sql, "changing beneath the store");
    REQUIRE_MESSAGE(status.ok(), status.message());
  }
  // Whether the server process `pid` waits on a lock (true) or is gone (false); up to 10 s.
  bool waits_on_lock(int pid) {
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < give_up) {
      auto rows =
          watch.query("SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1",
                      {Param::int64(pid)}, "reading what the store waits on");
      REQUIRE(rows.ok());
      if (rows->size() == 1 && rows->text(0, 0) == "t") return true;
    }
    return false;
  }
  // Ends the server process `pid` and waits (up to 10 s) until it is gone.
  void terminate(int pid) {
    REQUIRE(pid != 0);
    auto killed = watch.query("SELECT pg_terminate_backend($1)", {Param::int64(pid)},
                              "ending the store's connection");
    REQUIRE(killed.ok());
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < give_up) {
      if (number(fmt::format("SELECT count(*) FROM pg_stat_activity WHERE pid = {}", pid)) == 0) {
        return;
      }
    }
    FAIL("the server process " << pid << " is still there 10 s after it was ended");
  }
  // The store's database dropped (its connections ended) or created again, empty, through
  // a connection to the server's own database.
  void drop_database() {
    Connection admin = connect(server);
    REQUIRE(
        admin.exec(fmt::format("DROP DATABASE {} WITH (FORCE)", database.name()), "dropping").ok());
  }
  void create_database() {
    Connection admin = connect(server);
    REQUIRE(admin.exec(fmt::format("CREATE DATABASE {}", database.name()), "creating").ok());
  }
  PageTransition dispatch(std::size_t page) const {
    return PageTransition::dispatched(job.pages.at(page).page_id, 300);
  }

  std::string server;
  ManualWallClock clock;
  PgTestDatabase database;
  Connection raw;
  Connection watch;
  std::unique_ptr<PgStore> store;
  fairlane::EnqueuedJob job;
};

std::optional<std::string> server_or_skip() {
  auto server = pg_server_uri();
  if (!server) MESSAGE(kNoPgServer);
  return server;
}

}  // namespace

TEST_CASE(
    "PostgreSQL: PgStore finds a connection the server ended while idle, and writes on a new "
    "one") {
  const auto server = server_or_skip();
  if (!server) return;
  Fixture f(*server);
  const int first = f.store->backend_pid();
  f.terminate(first);

  // The write is not sent on the dead connection: it goes, once, on a new one.
  const auto applied = f.store->apply(std::vector{f.dispatch(0)});
  REQUIRE_MESSAGE(applied.ok(), applied.status().message());
  CHECK(applied->front() == 1);
  CHECK(f.store->reconnects() == 1);
  CHECK(f.store->backend_pid() != first);
  CHECK(f.store->write_health().ok());
  CHECK(f.number("SELECT in_flight FROM jobs") == 1);
  CHECK(f.number("SELECT count(*) FROM spend") == 1);
  // A statement of the hot paths (the job view), prepared on the new connection too.
  const auto view = f.store->job(f.job.job.id);
  REQUIRE_MESSAGE(view.ok(), view.status().message());
  CHECK(view->pages.in_flight == 1);
}

TEST_CASE("PostgreSQL: PgStore asks a read its connection broke under again, on a new connection") {
  const auto server = server_or_skip();
  if (!server) return;
  Fixture f(*server);
  // The test holds the jobs table locked, so that the store's read of a job waits.
  f.run("BEGIN; LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE");
  const int first = f.store->backend_pid();
  auto reading = std::async(std::launch::async, [&] { return f.store->job(f.job.job.id); });
  REQUIRE(f.waits_on_lock(first));
  f.terminate(first);
  // The read, asked again on a new connection, waits for the lock again, which is let go.
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  int second = 0;
  while (second == 0 && std::chrono::steady_clock::now() < give_up) {
    second = static_cast<int>(f.number(fmt::format(
        "SELECT coalesce(max(pid), 0) FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock' AND pid <> {}",
        first)));
  }
  CHECK(second != 0);
  f.run("ROLLBACK");
  const auto read = reading.get();
  REQUIRE_MESSAGE(read.ok(), read.status().message());
  CHECK(read->id == f.job.job.id);
  CHECK(f.store->reconnects() == 1);
}

TEST_CASE(
    "PostgreSQL: PgStore says outcome_unknown for a write its connection broke under, and the "
    "next write connects again") {
  const auto server = server_or_skip();
  if (!server) return;
  Fixture f(*server);
  // The test holds the first page's row, so that the store's batch waits with its write out.
  f.run(fmt::format("BEGIN; SELECT 1 FROM pages WHERE id = {} FOR UPDATE", f.job.pages[0].page_id));
  const int first = f.store->backend_pid();
  auto writing =
      std::async(std::launch::async, [&] { return f.store->apply(std::vector{f.dispatch(0)}); });
  REQUIRE(f.waits_on_lock(first));
  f.terminate(first);
  const auto lost = writing.get();
  f.run("ROLLBACK");
  REQUIRE_FALSE(lost.ok());
  CHECK(lost.status().code() == StatusCode::outcome_unknown);
  CHECK(lost.status().message().find("whether it was stored is unknown") != std::string::npos);
  CHECK(lost.status().message().find('\n') == std::string::npos);  // one log line
  CHECK(f.store->write_health().code() == StatusCode::outcome_unknown);
  // (It was not: the server ended the transaction with its process.)
  CHECK(f.number("SELECT in_flight FROM jobs") == 0);

  // The next write goes through on a new connection, and the health is good again.
  const auto applied = f.store->apply(std::vector{f.dispatch(1)});
  REQUIRE_MESSAGE(applied.ok(), applied.status().message());
  CHECK(applied->front() == 1);
  CHECK(f.store->reconnects() == 1);
  CHECK(f.store->write_health().ok());
  CHECK(f.number("SELECT in_flight FROM jobs") == 1);
}

TEST_CASE(
    "PostgreSQL: PgStore tries again to connect after a pause while connecting fails, and works "
    "once the database is back") {
  const auto server = server_or_skip();
  if (!server) return;
  Fixture f(*server);
  f.drop_database();

  const auto gone = f.store->job(f.job.job.id);
  REQUIRE_FALSE(gone.ok());
  CHECK(gone.status().code() == StatusCode::io_error);
  CHECK(gone.status().message().find("does not exist") != std::string::npos);
  CHECK(gone.status().message().find("tries again every 100 ms") != std::string::npos);
  CHECK(f.store->write_health().ok());  // a read does not judge the writes
  CHECK(f.store->probe_write().code() == StatusCode::io_error);
  CHECK(f.store->write_health().code() == StatusCode::io_error);

  // Back, but the pause is not over: the store has not tried yet.
  f.create_database();
  CHECK(f.store->users().status().code() == StatusCode::io_error);
  // The pauses double while connecting fails: 100 ms, then 200 ms.
  f.clock.advance(100ms);
  f.drop_database();
  const auto again = f.store->users();
  CHECK(again.status().message().find("tries again every 200 ms") != std::string::npos);
  f.create_database();
  f.clock.advance(199ms);
  CHECK(f.store->users().status().code() == StatusCode::io_error);
  f.clock.advance(1ms);
  // Connected: the new database migrated to the store's schema, and written.
  const auto users = f.store->users();
  REQUIRE_MESSAGE(users.ok(), users.status().message());
  CHECK(users->empty());
  CHECK(f.store->add_user("bob", 1).ok());
  CHECK(f.store->probe_write().ok());
  CHECK(f.store->write_health().ok());
  CHECK(f.store->reconnects() == 1);
}

TEST_CASE("PostgreSQL: PgStore tries to connect at once when the wall clock went back") {
  const auto server = server_or_skip();
  if (!server) return;
  Fixture f(*server);
  f.drop_database();
  CHECK(f.store->users().status().code() == StatusCode::io_error);
  f.create_database();
  // The clock is stepped back an hour: the pause of 100 ms from the last try is not waited
  // for an hour more.
  f.clock.advance(-std::chrono::hours(1));
  const auto users = f.store->users();
  CHECK_MESSAGE(users.ok(), users.status().message());
  CHECK(f.store->reconnects() == 1);
}

TEST_CASE(
    "PostgreSQL: PgStore does not hold its caller while a new connection waits on a silent "
    "server") {
  const auto server = server_or_skip();
  if (!server) return;
  PgTestDatabase database(*server);
  // Declared before the proxy, so destroyed after it: the proxy's end fails a connect still
  // held, which the store's destructor waits for.
  std::unique_ptr<PgStore> store;
  // The store reaches the server through a proxy that can go silent, and libpq would wait a
  // minute for a connect that gets no answer.
  const auto colon = server->rfind(':');
  const auto slash = server->find('/', colon);
  REQUIRE(colon != std::string::npos);
  REQUIRE(slash != std::string::npos);
  TcpProxy proxy(static_cast<std::uint16_t>(std::stoi(server->substr(colon + 1, slash - colon))));
  const std::string uri = fmt::format("{}:{}/{}?connect_timeout=60", server->substr(0, colon),
                                      proxy.port(), database.name());
  ManualWallClock clock;
  StoreOptions options;
  options.wall_clock = clock.function();
  options.connect_wait = 200ms;
  auto opened = PgStore::open(uri, options);
  REQUIRE_MESSAGE(opened.ok(), opened.status().message());
  store = std::move(opened).value();
  REQUIRE(store->add_user("ann", 1).ok());
  REQUIRE(proxy.accepted() == 1);

  // The connection ends, and the server says nothing to a new one.
  proxy.go_silent();
  const auto first = store->users();
  REQUIRE_FALSE(first.ok());
  CHECK(first.status().code() == StatusCode::io_error);
  CHECK_MESSAGE(first.status().message().find("a new one is being made") != std::string::npos,
                first.status().message());
  // The call has returned while the connect it started still waits in the silence.
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  while (proxy.held() == 0 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::yield();
  }
  CHECK(proxy.held() == 1);
  // Asked again meanwhile: it fails at once, and no second connect is started.
  const auto second = store->users();
  CHECK(second.status().code() == StatusCode::io_error);
  CHECK(proxy.accepted() == 2);
  CHECK(proxy.held() == 1);

  // The server speaks again (the silent connect is refused): after the pause, a call
  // connects and goes through.
  proxy.release();
  fairlane::Result<std::vector<fairlane::User>> users = second.status();
  while (!users.ok() && std::chrono::steady_clock::now() < give_up + 10s) {
    clock.advance(5s);
    users = store->users();
    std::this_thread::yield();
  }
  REQUIRE_MESSAGE(users.ok(), users.status().message());
  REQUIRE(users->size() == 1);
  CHECK(users->front().name == "ann");
  CHECK(store->reconnects() == 1);
}

TEST_CASE("PostgreSQL: PgStore checks a connection made while nobody asked before it uses it") {
  const auto server = server_or_skip();
  if (!server) return;
  // No wait: the new connection is made after the call that asked for it has failed.
  Fixture f(*server, 2, 0ms);
  std::vector<int> known{f.raw.backend_pid(), f.store->backend_pid()};
  f.terminate(known.back());
  CHECK(f.store->users().status().code() == StatusCode::io_error);  // a new one is being made
  // The new connection is made meanwhile, and the server ends it before anyone asks.
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  while (!f.store->connection_made() && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::yield();
  }
  REQUIRE(f.store->connection_made());
  int second = 0;
  while (second == 0 && std::chrono::steady_clock::now() < give_up) {
    second = static_cast<int>(f.number(fmt::format(
        "SELECT coalesce(max(pid), 0) FROM pg_stat_activity WHERE datname = current_database() "
        "AND pid <> pg_backend_pid() AND pid NOT IN ({})",
        fmt::join(known, ","))));
  }
  REQUIRE(second != 0);
  f.terminate(second);
  // A write then: not sent on the dead connection (which would be outcome_unknown), but on
  // a third, made for it.
  fairlane::Result<std::vector<std::int64_t>> applied =
      fairlane::Status{StatusCode::io_error, "not yet"};
  while (!applied.ok() && std::chrono::steady_clock::now() < give_up) {
    applied = f.store->apply(std::vector{f.dispatch(0)});
    REQUIRE(applied.status().code() != StatusCode::outcome_unknown);
  }
  REQUIRE_MESSAGE(applied.ok(), applied.status().message());
  CHECK(applied->front() == 1);
  CHECK(f.number("SELECT in_flight FROM jobs") == 1);
}
