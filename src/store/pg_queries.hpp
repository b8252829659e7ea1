// Every SQL statement the PostgreSQL layer runs, in one place (as queries.hpp is for SQLite).
#pragma once

#include <string_view>

namespace fairlane::store {

struct PgSql {
  // Orders migrating processes: an advisory lock held until the transaction ends, keyed by
  // "fairlane" read as a big-endian 64-bit integer.
  static constexpr std::string_view lock_migrations =
      "SELECT pg_advisory_xact_lock(7377293604775095909)";
  static constexpr std::string_view create_schema_migrations =
      "CREATE TABLE IF NOT EXISTS schema_migrations ("
      " version    INTEGER PRIMARY KEY,"
      " name       TEXT NOT NULL,"
      " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())";
  // Whether the first migration was ever attempted (a query naming a table that does not
  // exist fails before it runs, so this comes first).
  static constexpr std::string_view has_schema_migrations =
      "SELECT to_regclass('schema_migrations') IS NOT NULL";
  // The highest version applied.
  static constexpr std::string_view schema_version =
      "SELECT coalesce(max(version), 0) FROM schema_migrations";
  static constexpr std::string_view record_migration =
      "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)";
};

}  // namespace fairlane::store
