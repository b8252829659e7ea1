#include "store/pg_migrations.hpp"

#include <fmt/format.h>

#include <array>
#include <string>

#include "store/pg_queries.hpp"

namespace fairlane::store {
namespace {

int latest_version() {
  const auto all = pg_migrations();
  return all.empty() ? 0 : all.back().version;
}

Status too_new(const pg::Connection& connection, int version) {
  return {StatusCode::version_too_new,
          fmt::format("{} has schema version {}, written by a newer fairlane; this fairlane "
                      "knows versions up to {}. Upgrade fairlane, or give --db another database.",
                      connection.server(), version, latest_version())};
}

}  // namespace

Result<int> pg_schema_version(pg::Connection& connection) {
  const std::string_view doing = "reading the schema version";
  auto exists = connection.query(PgSql::has_schema_migrations, {}, doing);
  if (!exists.ok()) return exists.status();
  if (exists->text(0, 0) != "t") return 0;
  auto rows = connection.query(PgSql::schema_version, {}, doing);
  if (!rows.ok()) return rows.status();
  return static_cast<int>(rows->int64(0, 0));
}

Status pg_migrate(pg::Connection& connection, int target) {
  const auto all = pg_migrations();
  auto current = pg_schema_version(connection);
  if (!current.ok()) return current.status();
  if (current.value() > latest_version()) return too_new(connection, current.value());
  for (const Migration& migration : all) {
    if (migration.version <= current.value() || migration.version > target) continue;
    const std::string doing =
        fmt::format("migrating the schema to version {} ({})", migration.version, migration.name);
    pg::Transaction transaction(connection);
    if (!transaction.status().ok()) return transaction.status();
    Status status = connection.exec(PgSql::lock_migrations, doing);
    if (status.ok()) status = connection.exec(PgSql::create_schema_migrations, doing);
    if (!status.ok()) return status;
    // Another process may have migrated the database while this one waited for the lock.
    const auto now = pg_schema_version(connection);
    if (!now.ok()) return now.status();
    if (now.value() > latest_version()) return too_new(connection, now.value());
    if (now.value() >= migration.version) {
      status = transaction.commit();
      if (!status.ok()) return status;
      continue;
    }
    status = connection.exec(migration.sql, doing);
    if (!status.ok()) return status;
    const std::array params{pg::Param::int64(migration.version), pg::Param::text(migration.name)};
    auto recorded = connection.query(PgSql::record_migration, params, doing);
    if (!recorded.ok()) return recorded.status();
    status = transaction.commit();
    if (!status.ok()) return status;
  }
  return {};
}

}  // namespace fairlane::store
