#include "reader.hpp"

#include <sqlite3.h>

#include <fmt/format.h>

#include <optional>
#include <string_view>

#include "store/pg.hpp"

namespace fairlane::crashtest {
namespace {

class SqliteRow final : public Row {
 public:
  explicit SqliteRow(sqlite3_stmt* statement) : statement_(statement) {}
  [[nodiscard]] bool is_null(int column) const override {
    return sqlite3_column_type(statement_, column) == SQLITE_NULL;
  }
  [[nodiscard]] std::string text(int column) const override {
    const auto* bytes = sqlite3_column_text(statement_, column);
    return bytes == nullptr
               ? std::string()
               : std::string(reinterpret_cast<const char*>(bytes),
                             static_cast<std::size_t>(sqlite3_column_bytes(statement_, column)));
  }
  [[nodiscard]] std::int64_t int64(int column) const override {
    return sqlite3_column_int64(statement_, column);
  }

 private:
  sqlite3_stmt* statement_;
};

class SqliteReader final : public Reader {
 public:
  explicit SqliteReader(const std::string& path) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
      error_ = fmt::format("cannot open {} read-only: {}", path, sqlite3_errmsg(db_));
    }
  }
  ~SqliteReader() override { sqlite3_close(db_); }
  SqliteReader(const SqliteReader&) = delete;
  SqliteReader& operator=(const SqliteReader&) = delete;

  bool query(const char* sql, const std::function<void(const Row&)>& row) override {
    if (!error_.empty()) return false;
    sqlite3_stmt* statement = nullptr;
    if (sqlite3_prepare_v2(db_, sql, -1, &statement, nullptr) != SQLITE_OK) {
      error_ = sqlite3_errmsg(db_);
      return false;
    }
    const SqliteRow current(statement);
    int step = SQLITE_ROW;
    while ((step = sqlite3_step(statement)) == SQLITE_ROW) row(current);
    if (step != SQLITE_DONE) error_ = sqlite3_errmsg(db_);
    sqlite3_finalize(statement);
    return error_.empty();
  }

  std::string integrity() override {
    std::string said;
    const bool ran = query("PRAGMA integrity_check", [&](const Row& row) {
      if (!said.empty()) said += "; ";
      said += row.text(0);
    });
    return ran ? said : "could not run: " + error_;
  }

  [[nodiscard]] const std::string& error() const override { return error_; }

 private:
  sqlite3* db_ = nullptr;
  std::string error_;
};

class PgRow final : public Row {
 public:
  PgRow(const store::pg::Rows& rows, int row) : rows_(rows), row_(row) {}
  [[nodiscard]] bool is_null(int column) const override { return rows_.is_null(row_, column); }
  [[nodiscard]] std::string text(int column) const override {
    return std::string(rows_.text(row_, column));
  }
  [[nodiscard]] std::int64_t int64(int column) const override { return rows_.int64(row_, column); }

 private:
  const store::pg::Rows& rows_;
  int row_;
};

class PgReader final : public Reader {
 public:
  explicit PgReader(const std::string& uri) {
    auto connection = store::pg::Connection::open(uri);
    if (connection.ok()) {
      connection_.emplace(std::move(connection).value());
    } else {
      error_ = fmt::format("cannot connect to {}: {}", store::pg::describe(uri),
                           connection.status().message());
    }
  }

  bool query(const char* sql, const std::function<void(const Row&)>& row) override {
    if (!error_.empty()) return false;
    auto rows = connection_->query(sql, {}, "reading the database");
    if (!rows.ok()) {
      error_ = rows.status().message();
      return false;
    }
    for (int r = 0; r < rows->size(); ++r) row(PgRow(*rows, r));
    return true;
  }

  // Each job's counters against its pages' states: they move together in one transaction.
  std::string integrity() override {
    std::int64_t jobs = 0;
    const bool ran = query(
        "SELECT count(*) FROM jobs j LEFT JOIN (SELECT job_id, "
        "count(*) FILTER (WHERE state = 'queued') AS queued, "
        "count(*) FILTER (WHERE state = 'in_flight') AS in_flight, "
        "count(*) FILTER (WHERE state = 'done') AS done, "
        "count(*) FILTER (WHERE state = 'failed') AS failed, "
        "count(*) FILTER (WHERE state = 'cancelled') AS cancelled "
        "FROM pages GROUP BY job_id) p ON p.job_id = j.id "
        "WHERE (j.queued, j.in_flight, j.done, j.failed, j.cancelled) IS DISTINCT FROM "
        "(coalesce(p.queued, 0), coalesce(p.in_flight, 0), coalesce(p.done, 0), "
        "coalesce(p.failed, 0), coalesce(p.cancelled, 0))",
        [&](const Row& row) { jobs = row.int64(0); });
    if (!ran) return "could not run: " + error_;
    return jobs == 0
               ? "ok"
               : fmt::format("{} jobs whose counters disagree with their pages' states", jobs);
  }

  [[nodiscard]] const std::string& error() const override { return error_; }

 private:
  std::optional<store::pg::Connection> connection_;
  std::string error_;
};

}  // namespace

bool is_postgresql(const std::string& db) {
  const std::string_view view(db);
  return view.starts_with("postgresql://") || view.starts_with("postgres://");
}

std::unique_ptr<Reader> open_reader(const std::string& db) {
  if (is_postgresql(db)) return std::make_unique<PgReader>(db);
  return std::make_unique<SqliteReader>(db);
}

}  // namespace fairlane::crashtest
