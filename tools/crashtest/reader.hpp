// The crash test's view of the database: the same read-only queries on SQLite (the file,
// through SQLite itself) or on PostgreSQL (a postgresql:// URI, through libpq), one row at a
// time. PostgreSQL has no PRAGMA integrity_check; its integrity() checks, in its place, that
// every job's counters agree with its pages' states (the trigger pages_follow_state keeps
// them), which a lost or doubled write of a page would break.
//
// Thread safety: one Reader per thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace fairlane::crashtest {

// One row of a query's answer; columns are 0-based.
class Row {
 public:
  virtual ~Row() = default;
  [[nodiscard]] virtual bool is_null(int column) const = 0;
  [[nodiscard]] virtual std::string text(int column) const = 0;
  [[nodiscard]] virtual std::int64_t int64(int column) const = 0;
};

class Reader {
 public:
  virtual ~Reader() = default;
  // Runs `sql` (written so that both dialects read it alike), calling `row` for each row;
  // false (and error()) when it fails. After a failure, every query fails.
  virtual bool query(const char* sql, const std::function<void(const Row&)>& row) = 0;
  // "ok", or what is wrong, or "could not run: ...".
  virtual std::string integrity() = 0;
  [[nodiscard]] virtual const std::string& error() const = 0;
};

// True for a postgresql:// or postgres:// URI.
bool is_postgresql(const std::string& db);

// A reader of `db`: a SQLite file, opened read-only, or a PostgreSQL URI.
std::unique_ptr<Reader> open_reader(const std::string& db);

}  // namespace fairlane::crashtest
