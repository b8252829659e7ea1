// PgNotifications (src/store/pg_notifications.*): LISTEN/NOTIFY on a real io_context. Test
// cases named "PostgreSQL: ..." run against the tests' server (CTest fixture `postgres`);
// each drives the loop in bounded steps until what it waits for has arrived.
#include "store/pg_notifications.hpp"

#include <doctest/doctest.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "store/pg.hpp"
#include "support/pg.hpp"

using fairlane::StatusCode;
using fairlane::store::PgNotifications;
using fairlane::store::pg::Connection;
using fairlane::store::pg::Param;
using fairlane::testing::kNoPgServer;
using fairlane::testing::pg_server_uri;
using fairlane::testing::PgTestDatabase;

namespace {

using namespace std::chrono_literals;

struct Heard {
  std::vector<std::pair<std::string, std::string>> notifications;  // channel, payload
  int resyncs = 0;
};

// Opens a listener on `channels` that writes down what it hears in `heard`.
std::unique_ptr<PgNotifications> listen(boost::asio::io_context& io, const std::string& uri,
                                        std::vector<std::string> channels, Heard& heard) {
  auto opened = PgNotifications::open(
      io, uri, std::move(channels),
      [&heard](std::string_view channel, std::string_view payload) {
        heard.notifications.emplace_back(std::string(channel), std::string(payload));
      },
      [&heard] { ++heard.resyncs; });
  REQUIRE_MESSAGE(opened.ok(), opened.status().message());
  return std::move(opened).value();
}

// Runs `io` until `done()` holds, for at most `limit`; whether it holds.
bool run_until(boost::asio::io_context& io, const std::function<bool()>& done,
               std::chrono::milliseconds limit = 5s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    if (io.stopped()) io.restart();
    io.run_one_for(50ms);
  }
  return done();
}

void notify(Connection& sender, const std::string& channel, const std::string& payload) {
  const auto sent = sender.query("SELECT pg_notify($1, $2)",
                                 {Param::text(channel), Param::text(payload)}, "notifying");
  REQUIRE_MESSAGE(sent.ok(), sent.status().message());
}

Connection connect(const std::string& uri) {
  auto connection = Connection::open(uri);
  REQUIRE_MESSAGE(connection.ok(), connection.status().message());
  return std::move(connection).value();
}

}  // namespace

TEST_CASE("PgNotifications refuses a URI that does not parse and channels PostgreSQL cannot name") {
  boost::asio::io_context io;
  const auto nothing = [](std::string_view, std::string_view) {};
  const auto refused = [&](const std::string& uri, std::vector<std::string> channels) {
    auto opened = PgNotifications::open(io, uri, std::move(channels), nothing, [] {});
    REQUIRE_FALSE(opened.ok());
    return opened.status().code();
  };
  CHECK(refused("postgresql://ann:secret@[::1/lanes", {"jobs"}) == StatusCode::invalid_argument);
  CHECK(refused("postgresql://127.0.0.1:1/lanes", {}) == StatusCode::invalid_argument);
  CHECK(refused("postgresql://127.0.0.1:1/lanes", {""}) == StatusCode::invalid_argument);
  CHECK(refused("postgresql://127.0.0.1:1/lanes", {std::string(64, 'c')}) ==
        StatusCode::invalid_argument);
  CHECK(refused("postgresql://127.0.0.1:1/lanes", {std::string("a\0b", 3)}) ==
        StatusCode::invalid_argument);
}

TEST_CASE("PgNotifications keeps trying a server nobody listens on, and says why") {
  boost::asio::io_context io;
  Heard heard;
  const auto listener = listen(io, "postgresql://fairlane@127.0.0.1:1/lanes", {"jobs"}, heard);
  CHECK_FALSE(listener->listening());
  REQUIRE(run_until(io, [&] { return !listener->last_error().ok(); }));
  CHECK(listener->last_error().code() == StatusCode::io_error);
  CHECK(listener->last_error().message().find("127.0.0.1:1") != std::string::npos);
  CHECK_FALSE(listener->listening());
  CHECK(heard.resyncs == 0);
  CHECK(listener->reconnects() == 0);
}

TEST_CASE(
    "PostgreSQL: a notification sent from another connection reaches the handler with its "
    "channel and payload") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  const PgTestDatabase db(*server);
  boost::asio::io_context io;
  Heard heard;
  const auto listener = listen(io, db.uri(), {"fairlane_job_enqueued"}, heard);
  REQUIRE(run_until(io, [&] { return listener->listening(); }));
  CHECK(heard.resyncs == 1);  // the first LISTEN counts: nothing before it was seen either

  Connection sender = connect(db.uri());
  notify(sender, "fairlane_job_enqueued", "42");
  REQUIRE(run_until(io, [&] { return !heard.notifications.empty(); }));
  CHECK(heard.notifications ==
        std::vector<std::pair<std::string, std::string>>{{"fairlane_job_enqueued", "42"}});
  CHECK(listener->reconnects() == 0);
  CHECK(listener->last_error().ok());
}

TEST_CASE("PostgreSQL: notifications arrive from every channel listened on, and from no other") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  const PgTestDatabase db(*server);
  boost::asio::io_context io;
  Heard heard;
  // A name that only works quoted: mixed case, a space, a quote.
  const std::string odd = "Job \"changed\" Now";
  const auto listener = listen(io, db.uri(), {"enqueued", "changed", odd}, heard);
  REQUIRE(run_until(io, [&] { return listener->listening(); }));

  Connection sender = connect(db.uri());
  // One session's notifications arrive in the order sent: once the last is here, the one on
  // the channel nobody listens on would have been too.
  notify(sender, "unheard", "0");
  notify(sender, "changed", "1");
  notify(sender, odd, "2");
  notify(sender, "enqueued", "3");
  REQUIRE(run_until(io, [&] { return heard.notifications.size() >= 3; }));
  CHECK(heard.notifications == std::vector<std::pair<std::string, std::string>>{
                                   {"changed", "1"}, {odd, "2"}, {"enqueued", "3"}});
}

TEST_CASE("PostgreSQL: a notification sent in a transaction rolled back never arrives") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  const PgTestDatabase db(*server);
  boost::asio::io_context io;
  Heard heard;
  const auto listener = listen(io, db.uri(), {"jobs"}, heard);
  REQUIRE(run_until(io, [&] { return listener->listening(); }));

  Connection sender = connect(db.uri());
  {
    const fairlane::store::pg::Transaction transaction(sender);
    REQUIRE(transaction.status().ok());
    notify(sender, "jobs", "rolled back");
  }  // rolled back
  notify(sender, "jobs", "committed");
  REQUIRE(run_until(io, [&] { return !heard.notifications.empty(); }));
  CHECK(heard.notifications ==
        std::vector<std::pair<std::string, std::string>>{{"jobs", "committed"}});
}

TEST_CASE(
    "PostgreSQL: notifications resume after the listener's backend is killed, with a resync") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  const PgTestDatabase db(*server);
  boost::asio::io_context io;
  Heard heard;
  const auto listener = listen(io, db.uri(), {"jobs"}, heard);
  REQUIRE(run_until(io, [&] { return listener->listening(); }));
  REQUIRE(heard.resyncs == 1);

  Connection admin = connect(db.uri());
  const auto backend = [&] {
    auto rows = admin.query(
        "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND application_name = $2",
        {Param::text(db.name()), Param::text("fairlane-notifications")}, "finding the listener");
    REQUIRE_MESSAGE(rows.ok(), rows.status().message());
    REQUIRE(rows->size() == 1);
    return rows->int64(0, 0);
  };
  const std::int64_t first = backend();
  const auto killed = admin.query("SELECT pg_terminate_backend($1)", {Param::int64(first)},
                                  "terminating the listener's backend");
  REQUIRE_MESSAGE(killed.ok(), killed.status().message());

  REQUIRE(run_until(io, [&] { return listener->reconnects() == 1 && listener->listening(); }));
  CHECK(heard.resyncs == 2);
  CHECK(listener->last_error().code() == StatusCode::io_error);  // the loss, remembered
  CHECK(backend() != first);

  notify(admin, "jobs", "after");
  REQUIRE(run_until(io, [&] { return !heard.notifications.empty(); }));
  CHECK(heard.notifications == std::vector<std::pair<std::string, std::string>>{{"jobs", "after"}});
  CHECK(heard.resyncs == 2);
}

TEST_CASE("PostgreSQL: a notifications listener destroyed while it waits runs no handler after") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  const PgTestDatabase db(*server);
  boost::asio::io_context io;
  Heard kept_heard;
  Heard gone_heard;
  const auto kept = listen(io, db.uri(), {"jobs"}, kept_heard);
  auto gone = listen(io, db.uri(), {"jobs"}, gone_heard);
  REQUIRE(run_until(io, [&] { return kept->listening() && gone->listening(); }));

  gone.reset();  // its wait for the socket is pending
  Connection sender = connect(db.uri());
  notify(sender, "jobs", "1");
  REQUIRE(run_until(io, [&] { return !kept_heard.notifications.empty(); }));
  io.run_for(100ms);  // anything still queued for the one destroyed runs now, or never
  CHECK(gone_heard.notifications.empty());
  CHECK(gone_heard.resyncs == 1);
}

TEST_CASE("PostgreSQL: a notifications listener destroyed by its own handler hears no more") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  const PgTestDatabase db(*server);
  boost::asio::io_context io;
  Heard witness_heard;
  const auto witness = listen(io, db.uri(), {"jobs"}, witness_heard);
  std::vector<std::string> heard;
  std::unique_ptr<PgNotifications> listener;
  auto opened = PgNotifications::open(
      io, db.uri(), {"jobs"},
      [&](std::string_view, std::string_view payload) {
        heard.emplace_back(payload);
        listener.reset();
      },
      [] {});
  REQUIRE(opened.ok());
  listener = std::move(opened).value();
  REQUIRE(run_until(io, [&] { return witness->listening() && listener->listening(); }));

  // Committed together, so they arrive together: the second is read along with the first.
  Connection sender = connect(db.uri());
  {
    fairlane::store::pg::Transaction transaction(sender);
    REQUIRE(transaction.status().ok());
    notify(sender, "jobs", "1");
    notify(sender, "jobs", "2");
    REQUIRE(transaction.commit().ok());
  }
  REQUIRE(run_until(io, [&] { return witness_heard.notifications.size() == 2; }));
  io.run_for(100ms);
  CHECK(listener == nullptr);
  CHECK(heard == std::vector<std::string>{"1"});
}

TEST_CASE("PostgreSQL: a burst of notifications larger than one read all arrive, in order") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  const PgTestDatabase db(*server);
  boost::asio::io_context io;
  Heard heard;
  const auto listener = listen(io, db.uri(), {"jobs"}, heard);
  REQUIRE(run_until(io, [&] { return listener->listening(); }));

  // About 1 MB in one commit, far more than libpq reads at once: what one read leaves in the
  // socket must not wait for more to arrive.
  Connection sender = connect(db.uri());
  constexpr int kCount = 4000;
  const auto sent = sender.query(
      "SELECT pg_notify('jobs', lpad(g::text, 250, '0')) FROM generate_series(1, $1) AS g",
      {Param::int64(kCount)}, "notifying");
  REQUIRE_MESSAGE(sent.ok(), sent.status().message());
  REQUIRE(run_until(io, [&] { return heard.notifications.size() == kCount; }));
  bool in_order = true;
  for (int i = 0; i < kCount; ++i) {
    const std::string& payload = heard.notifications[static_cast<std::size_t>(i)].second;
    in_order = in_order && payload.size() == 250 && std::stoi(payload) == i + 1;
  }
  CHECK(in_order);
}
