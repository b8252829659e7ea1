#include "store/migrations.hpp"

#include <fmt/format.h>
#include <sqlite3.h>

#include "store/sqlite.hpp"

namespace fairlane::store {

Result<int> schema_version(sqlite3* db, const std::string& path) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &stmt, nullptr);
  if (rc == SQLITE_OK) rc = sqlite3_step(stmt);
  const int version = rc == SQLITE_ROW ? sqlite3_column_int(stmt, 0) : 0;
  sqlite3_finalize(stmt);
  if (rc != SQLITE_ROW) {
    return sqlite_status(rc, path, "reading the schema version", sqlite3_errmsg(db));
  }
  return version;
}

Status migrate(sqlite3* db, const std::string& path, int target) {
  const auto all = migrations();
  const int latest = all.empty() ? 0 : all.back().version;
  auto current = schema_version(db, path);
  if (!current.ok()) return current.status();
  if (current.value() > latest) {
    return {StatusCode::version_too_new,
            fmt::format("{} has schema version {}, written by a newer fairlane; this fairlane "
                        "knows versions up to {}. Upgrade fairlane, or give --db another path.",
                        path, current.value(), latest)};
  }
  for (const Migration& migration : all) {
    if (migration.version <= current.value() || migration.version > target) continue;
    const std::string doing =
        fmt::format("migrating the schema to version {} ({})", migration.version, migration.name);
    // The version is read again inside the transaction: another process may have migrated
    // the file meanwhile.
    char* message = nullptr;
    int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, &message);
    if (rc == SQLITE_OK) {
      const auto now = schema_version(db, path);
      if (!now.ok()) {
        sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
        return now.status();
      }
      const std::string sql = now.value() >= migration.version
                                  ? std::string("COMMIT;")
                                  : fmt::format("{}\nPRAGMA user_version = {};\nCOMMIT;",
                                                migration.sql, migration.version);
      rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message);
    }
    if (rc != SQLITE_OK) {
      const std::string detail = message != nullptr ? message : sqlite3_errstr(rc);
      sqlite3_free(message);
      if (sqlite3_get_autocommit(db) == 0) sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      return sqlite_status(rc, path, doing, detail);
    }
  }
  return {};
}

}  // namespace fairlane::store
