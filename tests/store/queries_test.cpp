#include <doctest/doctest.h>
#include <sqlite3.h>

#include <string>
#include <vector>

#include "store/migrations.hpp"
#include "store/queries.hpp"

namespace {

// The plan SQLite chooses for `sql`, one line per step.
std::vector<std::string> query_plan(sqlite3* db, std::string_view sql) {
  const std::string explain = "EXPLAIN QUERY PLAN " + std::string(sql);
  sqlite3_stmt* stmt = nullptr;
  REQUIRE_MESSAGE(sqlite3_prepare_v2(db, explain.c_str(), -1, &stmt, nullptr) == SQLITE_OK,
                  sqlite3_errmsg(db));
  std::vector<std::string> steps;
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    steps.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 3)));
  }
  sqlite3_finalize(stmt);
  return steps;
}

}  // namespace

TEST_CASE(
    "No query the store runs scans a whole table, except the users for their weights and names") {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(":memory:", &db) == SQLITE_OK);
  REQUIRE(fairlane::store::migrate(db, ":memory:", 1'000).ok());
  for (const std::string_view sql : fairlane::store::kAllQueries) {
    for (const std::string& step : query_plan(db, sql)) {
      // (A scan of json_each is of the statement's own argument, a list of ids, not a table;
      // a constant row is a SELECT of no table.)
      const bool full_scan =
          step.rfind("SCAN ", 0) == 0 && step.find("USING") == std::string::npos &&
          step.find("json_each VIRTUAL TABLE") == std::string::npos && step != "SCAN CONSTANT ROW";
      const bool allowed =
          sql == fairlane::store::Sql::weights || sql == fairlane::store::Sql::all_users;
      CHECK_MESSAGE(!(full_scan && !allowed), step << "  in  " << sql);
    }
  }
  // The lanes are read through their covering index, never the table rows.
  bool covering = false;
  for (const std::string& step : query_plan(db, fairlane::store::Sql::queued_pages)) {
    covering = covering || step.find("COVERING INDEX pages_queued") != std::string::npos;
  }
  CHECK(covering);
  sqlite3_close(db);
}
