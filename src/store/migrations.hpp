// The schema migrations (schema/sql/NNNN_name.sql), embedded in the binary at build time,
// and the runner that applies them.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "fairlane/core/result.hpp"
#include "fairlane/core/status.hpp"

struct sqlite3;

namespace fairlane::store {

struct Migration {
  int version;            // NNNN of the file name; versions run 1, 2, 3, ...
  std::string_view name;  // the rest of the file name
  std::string_view sql;
};

// Every migration, in version order (generated from schema/sql by cmake/EmbedSql.cmake).
std::span<const Migration> migrations();

// Brings the database to `target` (at most the latest version), one migration per
// transaction, recording each in PRAGMA user_version. Refuses a database whose version is
// above the latest this fairlane knows. `path` is for messages.
Status migrate(sqlite3* db, const std::string& path, int target);

// PRAGMA user_version of the database.
Result<int> schema_version(sqlite3* db, const std::string& path);

}  // namespace fairlane::store
