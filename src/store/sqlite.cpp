#include "store/sqlite.hpp"

#include <fmt/format.h>

#include <utility>

namespace fairlane::store {

Status sqlite_status(int rc, std::string_view path, std::string_view doing,
                     std::string_view detail) {
  switch (rc & 0xff) {
    case SQLITE_OK:
    case SQLITE_ROW:
    case SQLITE_DONE:
      return {};
    case SQLITE_FULL:
      return {StatusCode::disk_full,
              fmt::format("{}: the disk holding {} is full ({}). Free some space and retry; "
                          "nothing already accepted was lost.",
                          doing, path, detail)};
    case SQLITE_READONLY:
      return {StatusCode::read_only,
              fmt::format("{}: {} cannot be written ({}). Make the file and its directory "
                          "writable for fairlane, or give --db another path.",
                          doing, path, detail)};
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return {StatusCode::busy,
              fmt::format("{}: {} is locked by another process ({}). Stop the other program "
                          "using this database, or retry later.",
                          doing, path, detail)};
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return {StatusCode::corrupt,
              fmt::format("{}: {} is not a fairlane database, or it is damaged ({}). Restore "
                          "it from a backup, or give --db another path.",
                          doing, path, detail)};
    case SQLITE_CANTOPEN:
      return {StatusCode::io_error,
              fmt::format("{}: cannot open {} ({}). Check that its directory exists and is "
                          "writable for fairlane.",
                          doing, path, detail)};
    case SQLITE_IOERR:
      return {StatusCode::io_error,
              fmt::format("{}: the operating system failed a read or write of {} ({}). Check "
                          "the disk; nothing already accepted was lost.",
                          doing, path, detail)};
    default:
      return {StatusCode::internal, fmt::format("{}: unexpected SQLite error on {} ({}, code {}).",
                                                doing, path, detail, rc)};
  }
}

Result<Database> Database::open(const std::string& path, const std::string& vfs) {
  sqlite3* db = nullptr;
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  const int rc = sqlite3_open_v2(path.c_str(), &db, flags, vfs.empty() ? nullptr : vfs.c_str());
  if (rc != SQLITE_OK) {
    const std::string detail = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return sqlite_status(rc, path, "opening the database", detail);
  }
  // SQLite quietly opens a file it may not write read-only; fairlane must write.
  if (sqlite3_db_readonly(db, "main") == 1) {
    sqlite3_close(db);
    return sqlite_status(SQLITE_READONLY, path, "opening the database",
                         "the file or its file system is read-only");
  }
  sqlite3_extended_result_codes(db, 1);
  return Database(db, path);
}

Database::Database(Database&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), path_(std::move(other.path_)) {}

Database::~Database() {
  // Statements are finalized by their owners first; close_v2 copes with stragglers.
  if (db_ != nullptr) sqlite3_close_v2(db_);
}

Status Database::exec(std::string_view sql, std::string_view doing) {
  char* message = nullptr;
  const int rc = sqlite3_exec(db_, std::string(sql).c_str(), nullptr, nullptr, &message);
  if (rc == SQLITE_OK) return {};
  const std::string detail = message != nullptr ? message : sqlite3_errstr(rc);
  sqlite3_free(message);
  return sqlite_status(rc, path_, doing, detail);
}

Status Database::error(int rc, std::string_view doing) const {
  return sqlite_status(rc, path_, doing, sqlite3_errmsg(db_));
}

std::int64_t Database::last_insert_rowid() const {
  return sqlite3_last_insert_rowid(db_);
}

std::int64_t Database::changes() const {
  return sqlite3_changes64(db_);
}

Result<Statement> Statement::prepare(Database& db, std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  const int rc = sqlite3_prepare_v3(db.handle(), sql.data(), static_cast<int>(sql.size()),
                                    SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) return db.error(rc, fmt::format("preparing `{}`", sql));
  return Statement(stmt);
}

Statement::Statement(Statement&& other) noexcept
    : stmt_(std::exchange(other.stmt_, nullptr)),
      bind_error_(std::exchange(other.bind_error_, SQLITE_OK)) {}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    sqlite3_finalize(stmt_);
    stmt_ = std::exchange(other.stmt_, nullptr);
    bind_error_ = std::exchange(other.bind_error_, SQLITE_OK);
  }
  return *this;
}

Statement::~Statement() {
  sqlite3_finalize(stmt_);
}

void Statement::check_bind(int rc) {
  if (rc != SQLITE_OK && bind_error_ == SQLITE_OK) bind_error_ = rc;
}

Statement& Statement::bind(int index, std::int64_t value) {
  check_bind(sqlite3_bind_int64(stmt_, index, value));
  return *this;
}

Statement& Statement::bind(int index, std::string_view text) {
  // An empty view may have no data; it is still an empty string, not NULL.
  const char* data = text.data() != nullptr ? text.data() : "";
  check_bind(sqlite3_bind_text64(stmt_, index, data, text.size(), SQLITE_TRANSIENT, SQLITE_UTF8));
  return *this;
}

Statement& Statement::bind(int index, std::nullopt_t) {
  check_bind(sqlite3_bind_null(stmt_, index));
  return *this;
}

Statement& Statement::bind(int index, const std::optional<std::int64_t>& value) {
  return value ? bind(index, *value) : bind(index, std::nullopt);
}

Statement& Statement::bind_text(int index, const std::optional<std::string>& text) {
  return text ? bind(index, std::string_view(*text)) : bind(index, std::nullopt);
}

Statement& Statement::bind_blob(int index, const void* data, int size) {
  check_bind(sqlite3_bind_blob(stmt_, index, data, size, SQLITE_TRANSIENT));
  return *this;
}

int Statement::step() {
  if (bind_error_ != SQLITE_OK) return bind_error_;
  return sqlite3_step(stmt_);
}

int Statement::run() {
  int rc = SQLITE_ROW;
  while (rc == SQLITE_ROW) rc = step();
  return rc;
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  bind_error_ = SQLITE_OK;
}

bool Statement::is_null(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

std::int64_t Statement::int64(int column) const {
  return sqlite3_column_int64(stmt_, column);
}

std::optional<std::int64_t> Statement::optional_int64(int column) const {
  if (is_null(column)) return std::nullopt;
  return int64(column);
}

std::string Statement::text(int column) const {
  const auto* data = sqlite3_column_text(stmt_, column);
  const int size = sqlite3_column_bytes(stmt_, column);
  if (data == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(data), static_cast<std::size_t>(size));
}

std::string Statement::blob(int column) const {
  const void* data = sqlite3_column_blob(stmt_, column);
  const int size = sqlite3_column_bytes(stmt_, column);
  if (data == nullptr) return {};
  return std::string(static_cast<const char*>(data), static_cast<std::size_t>(size));
}

std::optional<std::string> Statement::optional_text(int column) const {
  if (is_null(column)) return std::nullopt;
  return text(column);
}

Transaction::Transaction(Database& db) : db_(db) {
  begin_status_ = db_.exec("BEGIN IMMEDIATE", "starting a transaction");
  open_ = begin_status_.ok();
}

Transaction::~Transaction() {
  // After some errors (a full disk, an I/O error) SQLite has already rolled back.
  if (open_ && sqlite3_get_autocommit(db_.handle()) == 0) {
    (void)db_.exec("ROLLBACK", "rolling back");
  }
}

Status Transaction::commit() {
  Status status = db_.exec("COMMIT", "committing");
  if (status.ok()) open_ = false;
  return status;
}

}  // namespace fairlane::store
