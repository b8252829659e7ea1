// The PostgreSQL schema migrations (schema/pg) and their runner, on a database of their own
// on the tests' server (CTest fixture `postgres`).
#include "store/pg_migrations.hpp"

#include <doctest/doctest.h>
#include <sqlite3.h>

#include <set>
#include <string>
#include <thread>
#include <utility>

#include "support/pg.hpp"
#include "support/store.hpp"

using fairlane::StatusCode;
using fairlane::store::pg_migrate;
using fairlane::store::pg_migrations;
using fairlane::store::pg_schema_version;
using fairlane::store::pg::Connection;
using fairlane::store::pg::Param;
using fairlane::testing::kNoPgServer;
using fairlane::testing::pg_server_uri;
using fairlane::testing::PgTestDatabase;
using fairlane::testing::TempDir;

using Columns = std::set<std::pair<std::string, std::string>>;  // (table, column)

namespace {

int latest() {
  return pg_migrations().back().version;
}

Connection connect(const std::string& uri) {
  auto connection = Connection::open(uri);
  REQUIRE_MESSAGE(connection.ok(), connection.status().message());
  return std::move(connection).value();
}

std::int64_t count(Connection& connection, const std::string& sql) {
  auto rows = connection.query(sql, {}, "counting");
  REQUIRE_MESSAGE(rows.ok(), rows.status().message());
  return rows->int64(0, 0);
}

// Every (table, column) of the SQLite schema at its latest version.
Columns sqlite_columns() {
  TempDir dir;
  const std::string path = dir.file("schema.db");
  { auto store = fairlane::testing::open_store(path); }
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  const char* sql =
      "SELECT m.name, c.name FROM sqlite_schema m, pragma_table_xinfo(m.name) c "
      "WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'";
  REQUIRE(sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr) == SQLITE_OK);
  Columns columns;
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    columns.emplace(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)),
                    reinterpret_cast<const char*>(sqlite3_column_text(stmt, 1)));
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return columns;
}

}  // namespace

TEST_CASE("PostgreSQL migrations are numbered 1, 2, ... and hold SQL") {
  const auto all = pg_migrations();
  REQUIRE(!all.empty());
  for (std::size_t i = 0; i < all.size(); ++i) {
    CHECK(all[i].version == static_cast<int>(i) + 1);
    CHECK(!all[i].sql.empty());
  }
  CHECK(all[0].name == "initial");
}

TEST_CASE("PostgreSQL: an empty database is migrated to the latest version, each one recorded") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  PgTestDatabase database(*server);
  Connection connection = connect(database.uri());
  CHECK(pg_schema_version(connection).value() == 0);
  const auto migrated = pg_migrate(connection, latest());
  REQUIRE_MESSAGE(migrated.ok(), migrated.message());
  CHECK(pg_schema_version(connection).value() == latest());
  CHECK(count(connection, "SELECT count(*) FROM schema_migrations") == latest());
  auto first =
      connection.query("SELECT name FROM schema_migrations WHERE version = 1", {}, "reading");
  REQUIRE(first.ok());
  CHECK(first->text(0, 0) == "initial");
  for (const char* table : {"users", "jobs", "pages", "page_texts", "page_images", "spend"}) {
    CAPTURE(table);
    CHECK(count(connection, std::string("SELECT count(*) FROM ") + table) == 0);
  }
}

TEST_CASE("PostgreSQL: migrating a migrated database again applies nothing and keeps its data") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  PgTestDatabase database(*server);
  {
    Connection connection = connect(database.uri());
    REQUIRE(pg_migrate(connection, latest()).ok());
    REQUIRE(connection
                .query("INSERT INTO users (name, key_sha256, weight, created_at) "
                       "VALUES ($1, $2, 3, 0)",
                       {Param::text("ann"), Param::bytes(std::string(32, '\x07'))}, "adding ann")
                .ok());
  }
  Connection connection = connect(database.uri());
  const std::string applied = "SELECT count(*) FROM schema_migrations";
  const auto before = count(connection, applied);
  const auto again = pg_migrate(connection, latest());
  REQUIRE_MESSAGE(again.ok(), again.message());
  CHECK(count(connection, applied) == before);
  CHECK(count(connection, "SELECT weight FROM users WHERE name = 'ann'") == 3);
}

TEST_CASE(
    "PostgreSQL: a database of a newer schema is refused, naming both versions and the server") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  PgTestDatabase database(*server);
  Connection connection = connect(database.uri());
  REQUIRE(pg_migrate(connection, latest()).ok());
  REQUIRE(connection
              .query("INSERT INTO schema_migrations (version, name) VALUES (99, 'future')", {},
                     "recording a future version")
              .ok());
  const auto refused = pg_migrate(connection, latest());
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.code() == StatusCode::version_too_new);
  CHECK(refused.message().find("schema version 99") != std::string::npos);
  CHECK(refused.message().find("up to " + std::to_string(latest())) != std::string::npos);
  CHECK(refused.message().find(database.uri()) != std::string::npos);
  CHECK(pg_schema_version(connection).value() == 99);
}

TEST_CASE("PostgreSQL: a migration that fails leaves the database as it was") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  PgTestDatabase database(*server);
  Connection connection = connect(database.uri());
  REQUIRE(connection.exec("CREATE TABLE spend (x BIGINT)", "in the way of migration 1").ok());
  const auto failed = pg_migrate(connection, latest());
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.message().find("version 1 (initial)") != std::string::npos);
  CHECK(pg_schema_version(connection).value() == 0);
  CHECK(count(connection, "SELECT count(*) FROM pg_tables WHERE tablename = 'users'") == 0);
}

TEST_CASE("PostgreSQL: two processes migrating one database at once apply each migration once") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  PgTestDatabase database(*server);
  Connection first = connect(database.uri());
  Connection second = connect(database.uri());
  fairlane::Status first_status;
  fairlane::Status second_status;
  {
    std::jthread other([&] { second_status = pg_migrate(second, latest()); });
    first_status = pg_migrate(first, latest());
  }
  CHECK_MESSAGE(first_status.ok(), first_status.message());
  CHECK_MESSAGE(second_status.ok(), second_status.message());
  CHECK(count(first, "SELECT count(*) FROM schema_migrations") == latest());
}

TEST_CASE("PostgreSQL: the schema keeps a job's counters, tokens and times as its pages change") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  PgTestDatabase database(*server);
  Connection connection = connect(database.uri());
  REQUIRE(pg_migrate(connection, latest()).ok());
  const auto run = [&](const char* sql) {
    const auto status = connection.exec(sql, "changing pages");
    REQUIRE_MESSAGE(status.ok(), status.message());
  };
  run("INSERT INTO users (id, name, key_sha256, created_at) VALUES (7, 'ann', '\\x00', 0);"
      "INSERT INTO jobs (id, public_id, user_id, name, max_tokens, page_count, queued, created_at)"
      "  VALUES (3, 'job_a', 7, 'a.pdf', 100, 2, 2, 0);"
      "INSERT INTO pages (id, job_id, user_id, seq, estimated_tokens) VALUES (11, 3, 7, 0, 50),"
      "  (12, 3, 7, 1, 50)");
  const auto job = [&] {
    auto rows = connection.query(
        "SELECT state, queued, in_flight, done, cancelled, output_tokens, started_at, finished_at "
        "FROM jobs WHERE id = 3",
        {}, "reading the job");
    REQUIRE(rows.ok());
    return std::string(rows->text(0, 0)) + " " + std::to_string(rows->int64(0, 1)) + " " +
           std::to_string(rows->int64(0, 2)) + " " + std::to_string(rows->int64(0, 3)) + " " +
           std::to_string(rows->int64(0, 4)) + " " + std::to_string(rows->int64(0, 5)) + " " +
           std::string(rows->is_null(0, 6) ? "-" : rows->text(0, 6)) + " " +
           std::string(rows->is_null(0, 7) ? "-" : rows->text(0, 7));
  };
  CHECK(job() == "queued 2 0 0 0 0 - -");
  run("UPDATE pages SET state = 'in_flight', dispatched_at = 100 WHERE id = 11");
  CHECK(job() == "running 1 1 0 0 0 100 -");
  run("UPDATE pages SET state = 'done', finished_at = 200, output_tokens = 30 WHERE id = 11");
  CHECK(job() == "running 1 0 1 0 30 100 -");
  run("UPDATE pages SET state = 'cancelled', finished_at = 300 WHERE id = 12");
  CHECK(job() == "cancelled 0 0 1 1 30 100 300");
}

TEST_CASE(
    "PostgreSQL: the schema has the SQLite schema's tables and columns, and only the lease "
    "besides") {
  const auto server = pg_server_uri();
  if (!server) {
    MESSAGE(kNoPgServer);
    return;
  }
  PgTestDatabase database(*server);
  Connection connection = connect(database.uri());
  REQUIRE(pg_migrate(connection, latest()).ok());
  auto rows = connection.query(
      "SELECT table_name, column_name FROM information_schema.columns "
      "WHERE table_schema = 'public' AND table_name NOT IN ('schema_migrations', 'lease')",
      {}, "listing the columns");
  REQUIRE_MESSAGE(rows.ok(), rows.status().message());
  Columns pg;
  for (int row = 0; row < rows->size(); ++row) {
    pg.emplace(std::string(rows->text(row, 0)), std::string(rows->text(row, 1)));
  }
  const Columns sqlite = sqlite_columns();
  CHECK(sqlite.size() > 40);
  // The leader's lease is the cluster's (schema/pg/0003_cluster.sql): a single SQLite process
  // has none.
  CHECK(count(connection,
              "SELECT count(*) FROM information_schema.columns "
              "WHERE table_schema = 'public' AND table_name = 'lease'") == 4);
  // A column one schema has and the other lacks: a migration is missing on one side.
  for (const auto& [table, column] : sqlite) {
    CAPTURE(table);
    CAPTURE(column);
    CHECK(pg.contains({table, column}));
  }
  for (const auto& [table, column] : pg) {
    CAPTURE(table);
    CAPTURE(column);
    CHECK(sqlite.contains({table, column}));
  }
}
