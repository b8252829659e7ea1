#include <doctest/doctest.h>
#include <sqlite3.h>

#include <fstream>
#include <string>

#include "fairlane/store/store.hpp"
#include "store/migrations.hpp"
#include "support/store.hpp"

using fairlane::StatusCode;
using fairlane::Store;
using fairlane::testing::open_store;
using fairlane::testing::TempDir;

namespace {

// A raw connection to a database file, for setting up what the store will find.
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    REQUIRE(sqlite3_open(path.c_str(), &db_) == SQLITE_OK);
  }
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;
  ~RawDb() { sqlite3_close(db_); }
  sqlite3* get() const { return db_; }
  void exec(const std::string& sql) {
    char* error = nullptr;
    const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error);
    const std::string message = error != nullptr ? error : "";
    sqlite3_free(error);
    REQUIRE_MESSAGE(rc == SQLITE_OK, message);
  }
  int user_version() const {
    auto version = fairlane::store::schema_version(db_, "test");
    REQUIRE(version.ok());
    return version.value();
  }

 private:
  sqlite3* db_ = nullptr;
};

}  // namespace

TEST_CASE("Migrations are numbered 1, 2, ... and the latest is what the store writes") {
  const auto all = fairlane::store::migrations();
  REQUIRE(all.size() >= 2);
  for (std::size_t i = 0; i < all.size(); ++i) CHECK(all[i].version == static_cast<int>(i) + 1);
  CHECK(Store::latest_schema_version() == all.back().version);
}

TEST_CASE("An empty file is migrated to the latest schema, in write-ahead-log mode") {
  TempDir dir;
  const std::string path = dir.file("new.db");
  { auto store = open_store(path); }
  RawDb db(path);
  CHECK(db.user_version() == Store::latest_schema_version());
  db.exec("SELECT count(*) FROM users; SELECT count(*) FROM spend;");
  sqlite3_stmt* stmt = nullptr;
  REQUIRE(sqlite3_prepare_v2(db.get(), "PRAGMA journal_mode", -1, &stmt, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(stmt) == SQLITE_ROW);
  CHECK(std::string(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0))) == "wal");
  sqlite3_finalize(stmt);
}

TEST_CASE("A database of the previous version is migrated and keeps its data") {
  TempDir dir;
  const std::string path = dir.file("v1.db");
  {
    RawDb db(path);
    REQUIRE(fairlane::store::migrate(db.get(), path, 1).ok());
    CHECK(db.user_version() == 1);
    db.exec(
        "INSERT INTO users (id, name, key_sha256, weight, created_at) VALUES (7, 'old', x'00', 2, "
        "0);"
        "INSERT INTO jobs (id, public_id, user_id, name, max_tokens, page_count, queued, "
        "created_at)"
        "  VALUES (3, 'job_old', 7, 'old.pdf', 100, 1, 1, 0);"
        "INSERT INTO pages (id, job_id, user_id, seq, estimated_tokens) VALUES (11, 3, 7, 0, 50);"
        "INSERT INTO page_texts (page_id, text) VALUES (11, 'old text');");
    char* error = nullptr;
    CHECK(sqlite3_exec(db.get(), "SELECT * FROM spend", nullptr, nullptr, &error) != SQLITE_OK);
    sqlite3_free(error);
  }
  auto store = open_store(path);
  CHECK(store->find_user_by_name("old")->weight == 2);
  CHECK(store->job_of("job_old", 7)->pages.queued == 1);
  CHECK(store->page_call(11)->text == "old text");
  CHECK(store->page_call(11)->max_tokens == 100);
  CHECK(store->recent_spend(std::chrono::seconds(60))->requests == 0);
  const auto lanes = store->load_lanes().value();
  REQUIRE(lanes.size() == 1);
  CHECK(lanes[0].pages[0].page_id == 11);
  RawDb db(path);
  CHECK(db.user_version() == Store::latest_schema_version());
}

TEST_CASE("A database written by a newer fairlane is refused, naming both versions") {
  TempDir dir;
  const std::string path = dir.file("future.db");
  { auto store = open_store(path); }
  { RawDb(path).exec("PRAGMA user_version = 99"); }
  auto store = Store::open(path);
  REQUIRE_FALSE(store.ok());
  CHECK(store.status().code() == StatusCode::version_too_new);
  const std::string& message = store.status().message();
  CHECK(message.find("99") != std::string::npos);
  CHECK(message.find("up to " + std::to_string(Store::latest_schema_version())) !=
        std::string::npos);
  CHECK(message.find(path) != std::string::npos);
}

TEST_CASE("A file that is not a database is refused as corrupt, naming it") {
  TempDir dir;
  const std::string path = dir.file("garbage.db");
  {
    std::ofstream out(path, std::ios::binary);
    for (int i = 0; i < 1000; ++i) out << "this is not an SQLite database ";
  }
  auto store = Store::open(path);
  REQUIRE_FALSE(store.ok());
  CHECK(store.status().code() == StatusCode::corrupt);
  CHECK(store.status().message().find(path) != std::string::npos);
}

TEST_CASE("A migration that fails leaves the schema version where it was") {
  TempDir dir;
  const std::string path = dir.file("clash.db");
  {
    RawDb db(path);
    REQUIRE(fairlane::store::migrate(db.get(), path, 1).ok());
    db.exec("CREATE TABLE spend (x INTEGER)");  // in the way of migration 2
  }
  auto store = Store::open(path);
  REQUIRE_FALSE(store.ok());
  CHECK(store.status().message().find("version 2") != std::string::npos);
  CHECK(RawDb(path).user_version() == 1);
}

// /readyz probes an unhealthy store with a write: it must not write the schema version this
// binary knows over the file's. A newer fairlane (a `prune` run beside an old `serve`) may
// have migrated the file meanwhile; written back, its next start would run that migration
// again.
TEST_CASE("The write probe leaves the file's schema version as it is") {
  TempDir dir;
  const std::string path = dir.file("probed.db");
  auto store = open_store(path);
  const int newer = Store::latest_schema_version() + 1;
  RawDb(path).exec("PRAGMA user_version = " + std::to_string(newer));
  CHECK(store->probe_write().ok());
  CHECK(RawDb(path).user_version() == newer);
}
