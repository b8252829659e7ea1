#include "store/pg.hpp"

#include <fmt/format.h>
#include <libpq-fe.h>
#include <poll.h>

#include <charconv>
#include <memory>
#include <utility>
#include <vector>

namespace fairlane::store::pg {
namespace {

// The server's message on one line, without libpq's trailing newline (and "ERROR:  "
// prefix): its lines ("server closed the connection unexpectedly\n\tThis probably means
// ...") joined with a space, so that a log line holds it whole.
std::string tidy_message(const char* message) {
  std::string text = message != nullptr ? message : "";
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  if (text.starts_with("ERROR:  ")) text.erase(0, 8);
  std::string line;
  line.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\n') {
      line += text[i];
      continue;
    }
    while (i + 1 < text.size() && (text[i + 1] == '\t' || text[i + 1] == ' ')) ++i;
    line += ' ';
  }
  return line.empty() ? std::string("no message") : line;
}

struct ConninfoDeleter {
  void operator()(PQconninfoOption* options) const { PQconninfoFree(options); }
};
using Conninfo = std::unique_ptr<PQconninfoOption, ConninfoDeleter>;

// The parsed options of `uri`, or null with libpq's reason in `error`.
Conninfo parse(const std::string& uri, std::string& error) {
  char* message = nullptr;
  Conninfo options(PQconninfoParse(uri.c_str(), &message));
  if (!options) {
    error = tidy_message(message != nullptr ? message : "out of memory");
    PQfreemem(message);
  }
  return options;
}

std::string option(const PQconninfoOption* options, std::string_view keyword) {
  for (const PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    if (keyword == o->keyword) return o->val != nullptr ? o->val : "";
  }
  return "";
}

// A URI that does not parse, for the message, without what may be its password: the part
// between "://" and the last "@" of its authority, and a query string naming a password.
// Empty for a key=value string naming one.
std::string redact(const std::string& uri) {
  const auto scheme = uri.find("://");
  if (scheme == std::string::npos) return uri.find("password") == std::string::npos ? uri : "";
  std::string shown = uri;
  const auto query = shown.find('?', scheme);
  if (query != std::string::npos && shown.find("password", query) != std::string::npos) {
    shown.replace(query, std::string::npos, "?***");
  }
  const auto authority = scheme + 3;
  const auto slash = shown.find('/', authority);
  const auto at = shown.rfind('@', slash);
  if (at == std::string::npos || at < authority) return shown;
  const auto colon = shown.find(':', authority);
  if (colon == std::string::npos || colon > at) return shown;
  return shown.replace(colon, at - colon, ":***");
}

// What the server said of a failed statement, for a message: its primary message, with its
// detail and hint when it gives them (not its context, which is the SQL); libpq's own message
// when the server said nothing (the connection broke before it could).
std::string error_of(const pg_result* result, const pg_conn* conn) {
  const char* primary =
      result != nullptr ? PQresultErrorField(result, PG_DIAG_MESSAGE_PRIMARY) : nullptr;
  if (primary == nullptr) {
    return tidy_message(result != nullptr ? PQresultErrorMessage(result) : PQerrorMessage(conn));
  }
  std::string text = primary;
  // (libpq's field codes are chars: 'D', 'H'.)
  for (const char field : {PG_DIAG_MESSAGE_DETAIL, PG_DIAG_MESSAGE_HINT}) {
    const char* more = PQresultErrorField(result, field);
    if (more != nullptr) text += fmt::format(" ({})", more);
  }
  return tidy_message(text.c_str());
}

void ignore_notice(void* /*arg*/, const char* /*message*/) {}

// PostgreSQL's type ids of the array elements sent in binary (pg_type.oid).
constexpr std::uint32_t kByteaOid = 17;
constexpr std::uint32_t kTextOid = 25;

void append_uint32(std::string& out, std::uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) {
    out += static_cast<char>((value >> static_cast<unsigned>(shift)) & 0xffU);
  }
}

// A one-dimensional array of `element_oid` in the binary form array_recv reads: the number of
// dimensions, whether any element is NULL, the element type, the length and lower bound, then
// each element's length in bytes (-1: NULL) and bytes, every integer 4 bytes, big-endian.
std::string binary_array(std::uint32_t element_oid,
                         std::span<const std::optional<std::string_view>> values) {
  std::size_t size = 20;
  bool has_null = false;
  for (const auto& v : values) {
    size += 4 + (v ? v->size() : 0);
    has_null = has_null || !v;
  }
  std::string out;
  out.reserve(size);
  append_uint32(out, 1);
  append_uint32(out, has_null ? 1 : 0);
  append_uint32(out, element_oid);
  append_uint32(out, static_cast<std::uint32_t>(values.size()));
  append_uint32(out, 1);
  for (const auto& v : values) {
    if (!v) {
      append_uint32(out, 0xffffffffU);
      continue;
    }
    append_uint32(out, static_cast<std::uint32_t>(v->size()));
    out += *v;
  }
  return out;
}

template <typename T, typename Append>
std::string array_literal(std::span<const T> values, Append append) {
  std::string out = "{";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    append(out, values[i]);
  }
  out += '}';
  return out;
}

}  // namespace

Status status_for(std::string_view sqlstate, std::string_view server, std::string_view doing,
                  std::string_view detail) {
  const std::string_view sql_class = sqlstate.substr(0, 2);
  if (sqlstate == kFencedSqlstate) {  // not a failure of the server: this instance was deposed
    return {StatusCode::fenced,
            fmt::format("{}: {}. Nothing of it was written; this instance must stop "
                        "dispatching until it leads again.",
                        doing, detail)};
  }
  if (sqlstate == "57014") {  // a statement or lock timeout cancelled the query
    return {StatusCode::busy,
            fmt::format("{}: the PostgreSQL server at {} cancelled it ({}). Retry later, or "
                        "raise statement_timeout for the role of --db.",
                        doing, server, detail)};
  }
  if (sqlstate.empty() || sql_class == "08" || sql_class == "57") {
    return {StatusCode::io_error,
            fmt::format("{}: lost the connection to PostgreSQL at {} ({}). Check that the server "
                        "is running and reachable; nothing committed was lost.",
                        doing, server, detail)};
  }
  if (sqlstate == "53100") {
    return {StatusCode::disk_full,
            fmt::format("{}: the disk of the PostgreSQL server at {} is full ({}). Free some "
                        "space there and retry; nothing already accepted was lost.",
                        doing, server, detail)};
  }
  if (sql_class == "53" || sql_class == "40" || sqlstate == "55P03") {
    return {StatusCode::busy,
            fmt::format("{}: the PostgreSQL server at {} is busy ({}). Retry later, or raise "
                        "its limits (max_connections, lock_timeout).",
                        doing, server, detail)};
  }
  if (sqlstate == "25006" || sqlstate == "42501") {
    return {StatusCode::read_only,
            fmt::format("{}: fairlane may not write to the database at {} ({}). Connect to the "
                        "primary, not a standby, and grant the role of --db what it needs.",
                        doing, server, detail)};
  }
  if (sqlstate == "23505") {
    return {StatusCode::already_exists, fmt::format("{}: {}.", doing, detail)};
  }
  if (sqlstate == "23503") {  // a foreign key names a row that does not exist
    return {StatusCode::not_found, fmt::format("{}: {}.", doing, detail)};
  }
  if (sql_class == "XX") {
    return {StatusCode::corrupt,
            fmt::format("{}: the PostgreSQL server at {} reports damaged data ({}). Restore the "
                        "database from a backup.",
                        doing, server, detail)};
  }
  if (sql_class == "58") {
    return {StatusCode::io_error,
            fmt::format("{}: the PostgreSQL server at {} failed a read or write ({}). Check the "
                        "server's disk and log.",
                        doing, server, detail)};
  }
  return {StatusCode::internal, fmt::format("{}: unexpected PostgreSQL error on {} ({}, SQLSTATE "
                                            "{}).",
                                            doing, server, detail, sqlstate)};
}

std::string describe(const std::string& uri) {
  std::string error;
  const Conninfo options = parse(uri, error);
  if (!options) return "";
  const std::string user = option(options.get(), "user");
  std::string host = option(options.get(), "host");
  if (host.empty()) host = option(options.get(), "hostaddr");
  if (host.empty()) host = "localhost";
  const std::string port = option(options.get(), "port");
  const std::string dbname = option(options.get(), "dbname");
  return fmt::format("postgresql://{}{}{}{}/{}", user, user.empty() ? "" : "@", host,
                     port.empty() ? "" : ":" + port, dbname);
}

Param Param::int64_array(std::span<const std::int64_t> values) {
  return text(
      array_literal(values, [](std::string& out, std::int64_t v) { out += std::to_string(v); }));
}

Param Param::int64_array(std::span<const std::optional<std::int64_t>> values) {
  return text(array_literal(values, [](std::string& out, const std::optional<std::int64_t>& v) {
    out += v ? std::to_string(*v) : std::string("NULL");
  }));
}

Param Param::text_array(std::span<const std::optional<std::string_view>> values) {
  bool holds_nul = false;
  for (const auto& v : values) holds_nul = holds_nul || (v && v->find('\0') != std::string::npos);
  return {binary_array(kTextOid, values), true, holds_nul};
}

Param Param::bytes_array(std::span<const std::optional<std::string_view>> values) {
  return {binary_array(kByteaOid, values), true};
}

Result<Connection> Connection::open(const std::string& uri) {
  std::string error;
  const Conninfo options = parse(uri, error);
  if (!options) {
    // libpq's reason quotes the URI, password and all (or, of a key=value string, any part).
    std::string shown = redact(uri);
    if (shown.empty()) {
      shown = "(a key=value string with a password, not shown)";
      error = "it does not parse";
    }
    for (auto at = error.find(uri); !uri.empty() && at != std::string::npos;
         at = error.find(uri, at)) {
      error.replace(at, uri.size(), shown);
      at += shown.size();
    }
    return Status{StatusCode::invalid_argument,
                  fmt::format("connecting to PostgreSQL: {} is not a connection URI ({}). "
                              "Write --db as postgresql://user@host:port/database.",
                              shown, error)};
  }
  const std::string server = describe(uri);
  // Defaults first: what the URI says (dbname, expanded) overrides them. A server that goes
  // silent (a partition, its host powered off) sends no reset, and a statement would wait
  // for its answer for as long as the silence lasts, on the caller's thread: the main
  // store's is the io thread. The keepalives probe a connection waiting for an answer after
  // 5 s without a byte, 2 s apart, and the user timeout drops it once sent data or a probe
  // has gone unacknowledged for 10 s. A statement the server is still working on is not cut:
  // its kernel acknowledges the probes. libpq's connect_timeout bounds the connect.
  const char* const keywords[] = {"fallback_application_name",
                                  "client_encoding",
                                  "connect_timeout",
                                  "keepalives_idle",
                                  "keepalives_interval",
                                  "keepalives_count",
                                  "tcp_user_timeout",
                                  "dbname",
                                  nullptr};
  const char* const values[] = {"fairlane", "UTF8",  "10",        "5",    "2",
                                "3",        "10000", uri.c_str(), nullptr};
  PGconn* conn = PQconnectdbParams(keywords, values, 1);
  if (conn == nullptr) {
    return Status{StatusCode::internal,
                  fmt::format("connecting to PostgreSQL at {}: out of memory.", server)};
  }
  if (PQstatus(conn) != CONNECTION_OK) {
    const std::string detail = tidy_message(PQerrorMessage(conn));
    PQfinish(conn);
    return Status{StatusCode::io_error,
                  fmt::format("connecting to PostgreSQL at {}: {}. Check that the server is "
                              "running and accepts connections from this host, and that the "
                              "user, password and database of --db exist.",
                              server, detail)};
  }
  PQsetNoticeProcessor(conn, ignore_notice, nullptr);
  return Connection(conn, server);
}

Connection::Connection(Connection&& other) noexcept
    : conn_(std::exchange(other.conn_, nullptr)),
      server_(std::move(other.server_)),
      round_trips_(other.round_trips_),
      last_error_(std::move(other.last_error_)),
      prepared_(std::move(other.prepared_)) {}

Connection::~Connection() {
  if (conn_ != nullptr) PQfinish(conn_);
}

int Connection::backend_pid() const {
  return PQbackendPID(conn_);
}

bool Connection::lost() const {
  return PQstatus(conn_) == CONNECTION_BAD;
}

bool Connection::alive() const {
  if (PQstatus(conn_) != CONNECTION_OK) return false;
  // Between statements the server sends nothing to a connection that does not listen, except
  // its goodbye: an error (57P01 and the like), then the end of the stream. So anything to
  // read means the connection is ending, even if the end itself has not arrived yet.
  pollfd ready{PQsocket(conn_), POLLIN, 0};
  return poll(&ready, 1, 0) == 0;
}

Status Connection::check(const pg_result* result, std::string_view doing) {
  const ExecStatusType status = result != nullptr ? PQresultStatus(result) : PGRES_FATAL_ERROR;
  switch (status) {
    case PGRES_COMMAND_OK:
    case PGRES_TUPLES_OK:
    case PGRES_EMPTY_QUERY:
      return {};
    default:
      break;
  }
  const char* sqlstate = result != nullptr ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  last_error_ = error_of(result, conn_);
  return status_for(sqlstate != nullptr ? sqlstate : "", server_, doing, last_error_);
}

Status Connection::exec(std::string_view sql, std::string_view doing) {
  ++round_trips_;
  PGresult* result = PQexec(conn_, std::string(sql).c_str());
  Status status = check(result, doing);
  PQclear(result);
  return status;
}

Status Connection::prepare(std::string_view sql, std::string_view doing) {
  std::string text(sql);
  if (prepared_.contains(text)) return {};
  std::string name = fmt::format("fairlane_{}", prepared_.size() + 1);
  ++round_trips_;
  // No types given: each parameter's is the cast where the statement first uses it.
  PGresult* result = PQprepare(conn_, name.c_str(), text.c_str(), 0, nullptr);
  Status status = check(result, doing);
  PQclear(result);
  if (status.ok()) prepared_.emplace(std::move(text), std::move(name));
  return status;
}

Result<Rows> Connection::query(std::string_view sql, std::span<const Param> params,
                               std::string_view doing) {
  std::vector<const char*> values;
  std::vector<int> lengths;
  std::vector<int> formats;
  values.reserve(params.size());
  lengths.reserve(params.size());
  formats.reserve(params.size());
  for (const Param& param : params) {
    // libpq reads a text parameter up to its first NUL: one inside would cut it short (and
    // the server refuses one inside an array's text element with an encoding error).
    if (param.text_with_nul()) {
      return Status{StatusCode::invalid_argument,
                    fmt::format("{}: parameter ${} holds a NUL byte, which PostgreSQL's text "
                                "cannot; remove it",
                                doing, &param - params.data() + 1)};
    }
    values.push_back(param.value() ? param.value()->c_str() : nullptr);
    lengths.push_back(param.value() ? static_cast<int>(param.value()->size()) : 0);
    formats.push_back(param.binary() ? 1 : 0);
  }
  ++round_trips_;
  const std::string text(sql);
  const auto prepared = prepared_.find(text);
  PGresult* result =
      prepared != prepared_.end()
          ? PQexecPrepared(conn_, prepared->second.c_str(), static_cast<int>(params.size()),
                           values.data(), lengths.data(), formats.data(), 0)
          : PQexecParams(conn_, text.c_str(), static_cast<int>(params.size()), nullptr,
                         values.data(), lengths.data(), formats.data(), 0);
  Status status = check(result, doing);
  if (!status.ok()) {
    PQclear(result);
    return status;
  }
  return Rows(result);
}

Rows::Rows(Rows&& other) noexcept : result_(std::exchange(other.result_, nullptr)) {}

Rows& Rows::operator=(Rows&& other) noexcept {
  if (this != &other) {
    PQclear(result_);
    result_ = std::exchange(other.result_, nullptr);
  }
  return *this;
}

Rows::~Rows() {
  PQclear(result_);
}

std::string_view Rows::command() const {
  return PQcmdStatus(result_);
}

int Rows::size() const {
  return PQntuples(result_);
}

int Rows::columns() const {
  return PQnfields(result_);
}

std::int64_t Rows::affected() const {
  std::int64_t count = 0;
  const std::string_view text = PQcmdTuples(result_);
  std::from_chars(text.data(), text.data() + text.size(), count);
  return count;
}

bool Rows::is_null(int row, int column) const {
  return PQgetisnull(result_, row, column) == 1;
}

std::string_view Rows::text(int row, int column) const {
  return {PQgetvalue(result_, row, column),
          static_cast<std::size_t>(PQgetlength(result_, row, column))};
}

std::int64_t Rows::int64(int row, int column) const {
  std::int64_t value = 0;
  const std::string_view digits = text(row, column);
  std::from_chars(digits.data(), digits.data() + digits.size(), value);
  return value;
}

std::optional<std::int64_t> Rows::optional_int64(int row, int column) const {
  if (is_null(row, column)) return std::nullopt;
  return int64(row, column);
}

std::string Rows::bytes(int row, int column) const {
  if (is_null(row, column)) return {};
  std::size_t size = 0;
  unsigned char* raw = PQunescapeBytea(
      reinterpret_cast<const unsigned char*>(PQgetvalue(result_, row, column)), &size);
  if (raw == nullptr) return {};
  std::string bytes(reinterpret_cast<const char*>(raw), size);
  PQfreemem(raw);
  return bytes;
}

Transaction::Transaction(Connection& connection) : connection_(connection) {
  begin_status_ = connection_.exec("BEGIN", "beginning a transaction");
  open_ = begin_status_.ok();
}

Transaction::~Transaction() {
  if (open_) (void)connection_.exec("ROLLBACK", "rolling back");
}

Status Transaction::commit() {
  open_ = false;
  auto done = connection_.query("COMMIT", {}, "committing");
  if (!done.ok()) return done.status();
  // COMMIT of a transaction a failed statement aborted rolls it back, and says so.
  if (done->command() != "COMMIT") {
    return status_for("25P02", connection_.server(), "committing",
                      "the transaction was aborted by an earlier error, and rolled back");
  }
  return {};
}

}  // namespace fairlane::store::pg
