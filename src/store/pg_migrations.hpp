// The PostgreSQL schema migrations (schema/pg/NNNN_name.sql), embedded in the binary at build
// time, and the runner that applies them. Each is recorded in the table schema_migrations
// (version, name, applied_at), which the runner creates; SQLite's user_version has no
// PostgreSQL counterpart.
//
// Thread safety: none beyond the connection's; several processes may migrate one database at
// once (an advisory lock orders them, and each reads the version again under it).
#pragma once

#include <span>

#include "fairlane/core/result.hpp"
#include "fairlane/core/status.hpp"
#include "store/migrations.hpp"
#include "store/pg.hpp"

namespace fairlane::store {

// Every PostgreSQL migration, in version order (generated from schema/pg by
// cmake/EmbedSql.cmake).
std::span<const Migration> pg_migrations();

// The highest version recorded in schema_migrations; 0 for a database without that table.
Result<int> pg_schema_version(pg::Connection& connection);

// Brings the database to `target` (at most the latest version), one migration per
// transaction, each recorded in schema_migrations in the transaction that applies it. Refuses
// (version_too_new) a database whose version is above the latest this fairlane knows.
Status pg_migrate(pg::Connection& connection, int target);

}  // namespace fairlane::store
