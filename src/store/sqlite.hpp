// Thin RAII over the SQLite C API for the store: a connection, prepared statements,
// transactions, and the one table that turns SQLite's result codes into a Status naming
// the file and the remedy.
//
// Thread safety: none; a Database and its statements belong to one thread.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fairlane/core/result.hpp"
#include "fairlane/core/status.hpp"

namespace fairlane::store {

class Statement;

class Database {
 public:
  // Opens or creates `path` through `vfs` (the default when empty).
  static Result<Database> open(const std::string& path, const std::string& vfs);

  Database(Database&& other) noexcept;
  Database& operator=(Database&&) = delete;
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  ~Database();

  [[nodiscard]] sqlite3* handle() const { return db_; }
  [[nodiscard]] const std::string& path() const { return path_; }

  // Runs one or more statements without results.
  Status exec(std::string_view sql, std::string_view doing);

  // The Status for a failed call that returned `rc` while `doing` something.
  [[nodiscard]] Status error(int rc, std::string_view doing) const;

  [[nodiscard]] std::int64_t last_insert_rowid() const;
  [[nodiscard]] std::int64_t changes() const;

 private:
  Database(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}

  sqlite3* db_;
  std::string path_;
};

// The Status for result code `rc` of the database at `path`; `detail` is SQLite's message.
Status sqlite_status(int rc, std::string_view path, std::string_view doing,
                     std::string_view detail);

// A prepared statement, reset after each use by whoever stepped it (see Use).
class Statement {
 public:
  Statement() = default;
  // Prepares `sql` for repeated use.
  static Result<Statement> prepare(Database& db, std::string_view sql);

  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  // Binds parameter `index` (1-based).
  Statement& bind(int index, std::int64_t value);
  Statement& bind(int index, std::string_view text);
  Statement& bind(int index, std::nullopt_t);
  Statement& bind(int index, const std::optional<std::int64_t>& value);
  // Text, or NULL for std::nullopt.
  Statement& bind_text(int index, const std::optional<std::string>& text);
  Statement& bind_blob(int index, const void* data, int size);

  // SQLITE_ROW, SQLITE_DONE, or an error code; a bind that failed is that error, and the
  // statement does not run.
  int step();
  // Steps to the end: SQLITE_DONE, or the error code.
  int run();
  // Clears bindings and rewinds, ready for the next use.
  void reset();

  [[nodiscard]] bool is_null(int column) const;
  [[nodiscard]] std::int64_t int64(int column) const;
  [[nodiscard]] std::optional<std::int64_t> optional_int64(int column) const;
  [[nodiscard]] std::string text(int column) const;
  [[nodiscard]] std::optional<std::string> optional_text(int column) const;
  // A BLOB's bytes (empty for NULL).
  [[nodiscard]] std::string blob(int column) const;

 private:
  explicit Statement(sqlite3_stmt* stmt) : stmt_(stmt) {}
  void check_bind(int rc);

  sqlite3_stmt* stmt_ = nullptr;
  int bind_error_ = SQLITE_OK;  // the first bind that failed since the last reset
};

// Resets a statement when it goes out of scope, so an early return never leaves it busy.
class Use {
 public:
  explicit Use(Statement& statement) : statement_(statement) {}
  Use(const Use&) = delete;
  Use& operator=(const Use&) = delete;
  ~Use() { statement_.reset(); }
  Statement* operator->() { return &statement_; }
  Statement& operator*() { return statement_; }

 private:
  Statement& statement_;
};

// BEGIN IMMEDIATE on construction (check status()), ROLLBACK on destruction unless
// committed. SQLite may already have rolled back after some errors; that is handled.
class Transaction {
 public:
  explicit Transaction(Database& db);
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();

  [[nodiscard]] const Status& status() const { return begin_status_; }
  Status commit();

 private:
  Database& db_;
  Status begin_status_;
  bool open_ = false;
};

}  // namespace fairlane::store
