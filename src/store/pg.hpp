// Thin RAII over libpq for the PostgreSQL store: a connection opened from a URI, the result
// of a query, parameterised queries, transactions, and the one table that turns PostgreSQL's
// SQLSTATEs into a Status naming the server and the remedy. Nothing here throws.
//
// Every call blocks until the server answers, or until a silent server's connection is
// dropped by the keepalives and TCP user timeout that open() asks for (about 10 s); driving
// the connection from the Asio loop (PQsocket, non-blocking mode) comes with the store that
// needs it (docs/postgresql.md, "A server that goes silent").
//
// Thread safety: none; a Connection and its Rows belong to one thread.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

#include "fairlane/core/result.hpp"
#include "fairlane/core/status.hpp"

// libpq's handles, declared here so that this header does not need libpq's.
struct pg_conn;
struct pg_result;

namespace fairlane::store::pg {

// The SQLSTATE fairlane_apply raises when the fence it was given no longer holds the lease
// (schema/pg/0003_cluster.sql): status_for makes it StatusCode::fenced.
inline constexpr std::string_view kFencedSqlstate = "FL001";

// The Status for an error with SQLSTATE `sqlstate` (five characters; empty when the server
// sent none, as when the connection broke) from `server` while `doing` something; `detail` is
// the server's message.
Status status_for(std::string_view sqlstate, std::string_view server, std::string_view doing,
                  std::string_view detail);

// What a connection URI or conninfo string names, for messages: postgresql://user@host:port/db
// with whatever it leaves out left out, and never its password. Empty if it does not parse.
std::string describe(const std::string& uri);

// One parameter of a query, sent in PostgreSQL's text form (bytes as themselves, for BYTEA, and
// arrays of text or bytes in the binary array form).
class Param {
 public:
  static Param null() { return Param(std::nullopt, false); }
  static Param int64(std::int64_t value) { return Param(std::to_string(value), false); }
  static Param int64(const std::optional<std::int64_t>& value) {
    return value ? int64(*value) : null();
  }
  static Param text(std::string_view value) { return Param(std::string(value), false); }
  static Param bytes(std::string_view value) { return Param(std::string(value), true); }
  // Arrays, for a whole column of rows in one parameter (`unnest($1::bigint[], $2::text[])`);
  // nullopt elements are NULL. Integers go in PostgreSQL's array syntax; text and bytes in
  // its binary array form (each element as its bytes, after its length), which the server
  // takes without parsing quotes and escapes (array_in cost 4 ms for the 300 KB of a 100-page
  // job's texts). Text must not hold a NUL byte (PostgreSQL's text cannot).
  static Param int64_array(std::span<const std::int64_t> values);
  static Param int64_array(std::span<const std::optional<std::int64_t>> values);
  static Param text_array(std::span<const std::optional<std::string_view>> values);
  static Param bytes_array(std::span<const std::optional<std::string_view>> values);

  [[nodiscard]] const std::optional<std::string>& value() const { return value_; }
  [[nodiscard]] bool binary() const { return binary_; }
  // Whether it is text holding a NUL byte, which query() refuses.
  [[nodiscard]] bool text_with_nul() const {
    return holds_nul_ || (!binary_ && value_ && value_->find('\0') != std::string::npos);
  }

 private:
  Param(std::optional<std::string> value, bool binary, bool holds_nul = false)
      : value_(std::move(value)), binary_(binary), holds_nul_(holds_nul) {}

  std::optional<std::string> value_;
  bool binary_;
  bool holds_nul_;  // a binary text array with a NUL byte in an element
};

// The rows a query returned (none for a statement without results); owns the PGresult.
// Values are read in PostgreSQL's text form.
class Rows {
 public:
  Rows(Rows&& other) noexcept;
  Rows& operator=(Rows&& other) noexcept;
  Rows(const Rows&) = delete;
  Rows& operator=(const Rows&) = delete;
  ~Rows();

  [[nodiscard]] int size() const;
  [[nodiscard]] int columns() const;
  // The command tag: "INSERT 0 3", "COMMIT", "ROLLBACK", ...
  [[nodiscard]] std::string_view command() const;
  // Rows an INSERT, UPDATE or DELETE touched.
  [[nodiscard]] std::int64_t affected() const;

  [[nodiscard]] bool is_null(int row, int column) const;
  [[nodiscard]] std::string_view text(int row, int column) const;
  // An integer column's value (0 for NULL).
  [[nodiscard]] std::int64_t int64(int row, int column) const;
  [[nodiscard]] std::optional<std::int64_t> optional_int64(int row, int column) const;
  // A BYTEA column's bytes (empty for NULL).
  [[nodiscard]] std::string bytes(int row, int column) const;

 private:
  friend class Connection;
  explicit Rows(pg_result* result) : result_(result) {}

  pg_result* result_;
};

class Connection {
 public:
  // Connects to the server `uri` names (postgresql://..., postgres://... or key=value), with
  // a connect timeout of 10 s unless the URI sets one. A URI that does not parse is
  // invalid_argument; a server that cannot be reached or refuses the login is io_error.
  static Result<Connection> open(const std::string& uri);

  Connection(Connection&& other) noexcept;
  Connection& operator=(Connection&&) = delete;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  // The server, as describe() names it, for messages.
  [[nodiscard]] const std::string& server() const { return server_; }
  [[nodiscard]] pg_conn* handle() const { return conn_; }
  // Statements sent so far (each exec or query is one round trip to the server).
  [[nodiscard]] std::int64_t round_trips() const { return round_trips_; }
  // The server process serving this connection (PQbackendPID), for tests that end it.
  [[nodiscard]] int backend_pid() const;

  // Whether the connection broke (PQstatus is CONNECTION_BAD): the server ended it or the
  // network failed. A broken connection never works again; open another.
  [[nodiscard]] bool lost() const;
  // Whether it still works, as far as can be known without a round trip, between statements:
  // not if the server sent anything meanwhile (a poll of its socket, which never waits), so
  // that a connection the server ended while it was idle (a restart, pg_terminate_backend,
  // an idle timeout) is found broken before a statement is sent on it, rather than by the
  // statement. Not for a connection that listens for notifications.
  [[nodiscard]] bool alive() const;
  // What the server (or libpq) said of the last statement that failed here, on one line:
  // why it broke, once lost().
  [[nodiscard]] const std::string& last_error() const { return last_error_; }

  // Runs one or more statements without parameters, ignoring what they return.
  Status exec(std::string_view sql, std::string_view doing);

  // Prepares the one statement `sql` on this connection (PQprepare, one round trip): from
  // then on query() of the same text runs it as the prepared statement (PQexecPrepared), so
  // the server parses it once and plans it as it sees fit (a generic plan once it pays),
  // rather than parsing and planning it on every call. A connection opened again prepares
  // its statements again.
  Status prepare(std::string_view sql, std::string_view doing);

  // Runs one statement with `params` bound to $1, $2, ..., as its prepared statement if
  // prepare() was given its text. A text parameter holding a NUL byte is refused
  // (invalid_argument) before anything is sent.
  Result<Rows> query(std::string_view sql, std::span<const Param> params, std::string_view doing);
  Result<Rows> query(std::string_view sql, std::initializer_list<Param> params,
                     std::string_view doing) {
    return query(sql, std::span<const Param>(params.begin(), params.size()), doing);
  }

 private:
  Connection(pg_conn* conn, std::string server) : conn_(conn), server_(std::move(server)) {}
  // The Status for `result` (which may be null), or ok if it is a success.
  Status check(const pg_result* result, std::string_view doing);

  pg_conn* conn_;
  std::string server_;
  std::int64_t round_trips_ = 0;
  std::string last_error_;
  // The statements prepared on this connection: their text, and the name each has there.
  std::unordered_map<std::string, std::string> prepared_;
};

// BEGIN on construction (check status()), ROLLBACK on destruction unless committed.
class Transaction {
 public:
  explicit Transaction(Connection& connection);
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();

  [[nodiscard]] const Status& status() const { return begin_status_; }
  Status commit();

 private:
  Connection& connection_;
  Status begin_status_;
  bool open_ = false;
};

}  // namespace fairlane::store::pg
