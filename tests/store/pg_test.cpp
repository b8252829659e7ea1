// The libpq layer (src/store/pg.*): URIs, errors as Status values, parameters, transactions.
// Test cases named "PostgreSQL: ..." run against the tests' server (CTest fixture `postgres`).
#include "store/pg.hpp"

#include <doctest/doctest.h>

#include <string>

#include "support/pg.hpp"

using fairlane::StatusCode;
using fairlane::store::pg::Connection;
using fairlane::store::pg::Param;
using fairlane::store::pg::status_for;
using fairlane::store::pg::Transaction;
using fairlane::testing::kNoPgServer;
using fairlane::testing::pg_server_uri;
using fairlane::testing::PgTestDatabase;

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("A PostgreSQL URI is described for messages without its password") {
  using fairlane::store::pg::describe;
  CHECK(describe("postgresql://ann:secret@db.example:5433/lanes") ==
        "postgresql://ann@db.example:5433/lanes");
  CHECK(describe("postgres://db.example/lanes") == "postgresql://db.example/lanes");
  CHECK(describe("host=10.0.0.2 port=6000 user=bo password=secret dbname=x") ==
        "postgresql://bo@10.0.0.2:6000/x");
  CHECK(describe("postgresql://[::1") == "");
}

TEST_CASE(
    "A PostgreSQL URI that does not parse is refused as invalid_argument, without its password") {
  auto connection = Connection::open("postgresql://ann:secret@[::1/lanes");
  REQUIRE_FALSE(connection.ok());
  CHECK(connection.status().code() == StatusCode::invalid_argument);
  const std::string& message = connection.status().message();
  CHECK(contains(message, "postgresql://ann:***@[::1/lanes"));
  CHECK_FALSE(contains(message, "secret"));
  CHECK(contains(message, "postgresql://user@host:port/database"));

  auto in_query = Connection::open("postgresql://[::1/lanes?user=ann&password=secret");
  REQUIRE_FALSE(in_query.ok());
  CHECK(contains(in_query.status().message(), "postgresql://[::1/lanes?***"));
  CHECK_FALSE(contains(in_query.status().message(), "secret"));
  auto key_value = Connection::open("host=db password=secret port='5432");
  REQUIRE_FALSE(key_value.ok());
  CHECK(key_value.status().code() == StatusCode::invalid_argument);
  CHECK_FALSE(contains(key_value.status().message(), "secret"));
}

TEST_CASE("A PostgreSQL server nobody listens for is io_error, naming the server and the remedy") {
  auto connection = Connection::open("postgresql://ann:secret@127.0.0.1:1/lanes");
  REQUIRE_FALSE(connection.ok());
  CHECK(connection.status().code() == StatusCode::io_error);
  const std::string& message = connection.status().message();
  CHECK(contains(message, "postgresql://ann@127.0.0.1:1/lanes"));
  CHECK_FALSE(contains(message, "secret"));
  CHECK(contains(message, "Check that the server is running"));
}

TEST_CASE("PostgreSQL's SQLSTATEs map to the store's status codes") {
  const auto code = [](std::string_view sqlstate) {
    return status_for(sqlstate, "postgresql://db/x", "doing", "detail").code();
  };
  CHECK(code("") == StatusCode::io_error);  // no SQLSTATE: the connection broke
  CHECK(code("08006") == StatusCode::io_error);
  CHECK(code("57P01") == StatusCode::io_error);  // the server shut down
  CHECK(code("57014") == StatusCode::busy);      // statement_timeout
  CHECK(code("53100") == StatusCode::disk_full);
  CHECK(code("53300") == StatusCode::busy);       // too many connections
  CHECK(code("40001") == StatusCode::busy);       // serialization failure
  CHECK(code("40P01") == StatusCode::busy);       // deadlock
  CHECK(code("55P03") == StatusCode::busy);       // lock not available
  CHECK(code("25006") == StatusCode::read_only);  // a standby
  CHECK(code("42501") == StatusCode::read_only);  // insufficient privilege
  CHECK(code("23505") == StatusCode::already_exists);
  CHECK(code("23503") == StatusCode::not_found);  // a foreign key names no row
  CHECK(code("XX001") == StatusCode::corrupt);
  CHECK(code("58030") == StatusCode::io_error);
  CHECK(code("42601") == StatusCode::internal);  // a syntax error is a bug
  CHECK(code("FL001") == StatusCode::fenced);    // fairlane_apply: this instance was deposed
  const auto status = status_for("53100", "postgresql://db/x", "enqueueing", "No space left");
  CHECK(status.message() ==
        "enqueueing: the disk of the PostgreSQL server at postgresql://db/x is full (No space "
        "left). Free some space there and retry; nothing already accepted was lost.");
}

TEST_CASE("PostgreSQL: a database that does not exist is io_error, naming it") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  const std::string uri = server->substr(0, server->rfind('/') + 1) + "no_such_database";
  auto connection = Connection::open(uri);
  REQUIRE_FALSE(connection.ok());
  CHECK(connection.status().code() == StatusCode::io_error);
  CHECK(contains(connection.status().message(), "/no_such_database"));
  CHECK(contains(connection.status().message(), "does not exist"));
}

TEST_CASE("PostgreSQL: parameters and values round-trip: integers, text, NULL and bytes") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  PgTestDatabase database(*server);
  auto connection = Connection::open(database.uri());
  REQUIRE_MESSAGE(connection.ok(), connection.status().message());
  CHECK(connection->server() == database.uri());
  REQUIRE(connection->exec("CREATE TABLE t (n BIGINT, s TEXT, b BYTEA)", "creating").ok());
  const std::string bytes("\0\x01\xff'\\x", 6);
  auto inserted = connection->query(
      "INSERT INTO t VALUES ($1, $2, $3), ($4, $5, $6)",
      {Param::int64(-9'000'000'000'000'000'000), Param::text("l'été; DROP TABLE t"),
       Param::bytes(bytes), Param::int64(std::nullopt), Param::null(), Param::null()},
      "inserting");
  REQUIRE_MESSAGE(inserted.ok(), inserted.status().message());
  CHECK(inserted->affected() == 2);
  CHECK(inserted->command() == "INSERT 0 2");
  auto rows = connection->query("SELECT n, s, b FROM t ORDER BY n NULLS LAST", {}, "reading");
  REQUIRE_MESSAGE(rows.ok(), rows.status().message());
  REQUIRE(rows->size() == 2);
  CHECK(rows->columns() == 3);
  CHECK(rows->int64(0, 0) == -9'000'000'000'000'000'000);
  CHECK(rows->text(0, 1) == "l'été; DROP TABLE t");
  CHECK(rows->bytes(0, 2) == bytes);
  CHECK(rows->is_null(1, 0));
  CHECK(rows->optional_int64(1, 0) == std::nullopt);
  CHECK(rows->optional_int64(0, 0) == -9'000'000'000'000'000'000);
  CHECK(rows->bytes(1, 2).empty());

  // Text cannot hold a NUL byte: refused, rather than cut short at it.
  auto nul = connection->query("INSERT INTO t (s) VALUES ($1)",
                               {Param::text(std::string("cut\0here", 8))}, "inserting");
  REQUIRE_FALSE(nul.ok());
  CHECK(nul.status().code() == StatusCode::invalid_argument);
  CHECK(contains(nul.status().message(), "parameter $1 holds a NUL byte"));
  CHECK(connection->query("SELECT count(*) FROM t", {}, "counting")->int64(0, 0) == 2);
}

TEST_CASE("PostgreSQL: a failed statement is the Status of its SQLSTATE, naming the server") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  PgTestDatabase database(*server);
  auto connection = Connection::open(database.uri());
  REQUIRE_MESSAGE(connection.ok(), connection.status().message());
  REQUIRE(connection->exec("CREATE TABLE t (name TEXT UNIQUE)", "creating").ok());
  REQUIRE(connection->query("INSERT INTO t VALUES ($1)", {Param::text("ann")}, "adding ann").ok());
  auto again = connection->query("INSERT INTO t VALUES ($1)", {Param::text("ann")}, "adding ann");
  REQUIRE_FALSE(again.ok());
  CHECK(again.status().code() == StatusCode::already_exists);
  CHECK(contains(again.status().message(), "adding ann: duplicate key value"));
  const auto bad = connection->exec("SELEKT 1", "checking");
  CHECK(bad.code() == StatusCode::internal);
  CHECK(contains(bad.message(), database.uri()));
  CHECK(contains(bad.message(), "SQLSTATE 42601"));
}

TEST_CASE(
    "PostgreSQL: a transaction is rolled back unless committed, and a commit after a failure is "
    "refused") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  PgTestDatabase database(*server);
  auto connection = Connection::open(database.uri());
  REQUIRE_MESSAGE(connection.ok(), connection.status().message());
  REQUIRE(connection->exec("CREATE TABLE t (n BIGINT PRIMARY KEY)", "creating").ok());
  const auto count = [&] {
    auto rows = connection->query("SELECT count(*) FROM t", {}, "counting");
    REQUIRE(rows.ok());
    return rows->int64(0, 0);
  };
  {
    Transaction transaction(*connection);
    REQUIRE(transaction.status().ok());
    REQUIRE(connection->query("INSERT INTO t VALUES (1)", {}, "inserting").ok());
  }
  CHECK(count() == 0);
  {
    Transaction transaction(*connection);
    REQUIRE(connection->query("INSERT INTO t VALUES (1)", {}, "inserting").ok());
    CHECK(transaction.commit().ok());
  }
  CHECK(count() == 1);
  {
    Transaction transaction(*connection);
    REQUIRE(connection->query("INSERT INTO t VALUES (2)", {}, "inserting").ok());
    CHECK_FALSE(connection->query("INSERT INTO t VALUES (1)", {}, "inserting").ok());
    const auto committed = transaction.commit();
    CHECK_FALSE(committed.ok());
    CHECK(contains(committed.message(), "rolled back"));
  }
  CHECK(count() == 1);
}
