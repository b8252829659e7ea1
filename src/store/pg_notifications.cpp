// PgNotifications (pg_notifications.hpp). One State, shared with the waits in flight, which
// hold it weakly: a wait that completes after the owner went finds nothing and does nothing.
// Each completion locks it for its whole run, so that an owner destroying it from inside the
// handler (or resync) leaves the State alive until that run ends; `stopped` then ends it.
//
// The phases of one connection: connecting (PQconnectPoll says which way to wait), sending
// the LISTENs (PQflush until all is out), reading their results, then listening. A connection
// that fails or is lost is closed, and the next is started after the pause. Every close bumps
// `attempt`, and each wait carries the attempt it was made for, so a completion of a closed
// connection's wait (already queued when it was closed) is recognised and ignored.
#include "store/pg_notifications.hpp"

#include <fmt/format.h>
#include <libpq-fe.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <optional>
#include <utility>

#include "fairlane/core/backoff.hpp"
#include "store/pg.hpp"

namespace fairlane::store {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

constexpr auto kFirstPause = 100ms;
constexpr auto kLongestPause = 5s;
// From the start of a connection to its LISTENs taking effect. libpq's connect_timeout only
// applies to its blocking connect, so the asynchronous one keeps its own.
constexpr auto kConnectDeadline = 10s;
// PostgreSQL's longest identifier (NAMEDATALEN - 1); LISTEN would cut a longer one short.
constexpr std::size_t kLongestChannel = 63;

// libpq's message without its trailing newline.
std::string tidy(const char* message) {
  std::string text = message != nullptr ? message : "";
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text.empty() ? std::string("no message") : text;
}

void ignore_notice(void* /*arg*/, const char* /*message*/) {}

struct NotifyDeleter {
  void operator()(PGnotify* notify) const { PQfreemem(notify); }
};

}  // namespace

struct PgNotifications::State : std::enable_shared_from_this<State> {
  enum class Phase { pausing, connecting, sending, reading, listening, stopped };

  State(asio::io_context& io_context, std::string uri_, std::vector<std::string> channels_,
        Handler handler_, std::function<void()> resync_)
      : io(io_context),
        uri(std::move(uri_)),
        server(pg::describe(uri)),
        channels(std::move(channels_)),
        handler(std::move(handler_)),
        resync(std::move(resync_)),
        timer(io_context) {}

  State(const State&) = delete;
  State& operator=(const State&) = delete;
  // Asio's cancel() and release() throw only when the reactor itself fails: std::terminate is
  // right then.
  // NOLINTNEXTLINE(bugprone-exception-escape)
  ~State() { stop(); }

  void connect();
  void wait(bool write);
  void on_ready();
  void poll_connect();
  void send_listens();
  void flush();
  void read_results();
  void now_listening();
  void read_notifications();
  bool deliver();  // false once stopped
  void fail(std::string_view doing, const std::string& detail);
  void close();
  void pause();
  void stop();

  asio::io_context& io;
  const std::string uri;
  const std::string server;
  const std::vector<std::string> channels;
  const Handler handler;
  const std::function<void()> resync;

  PGconn* conn = nullptr;
  std::optional<asio::posix::stream_descriptor> socket;  // libpq's socket, never closed here
  asio::steady_timer timer;  // the connect deadline, or the pause before the next connect
  Phase phase = Phase::pausing;
  std::uint64_t attempt = 0;     // bumped at every close
  std::int64_t failures = 0;     // in a row, for the pause
  bool listened_before = false;  // the next listen is a reconnect
  bool results_failed = false;   // a LISTEN was refused
  std::int64_t reconnect_count = 0;
  Status last_error;
};

void PgNotifications::State::connect() {
  // Defaults first: what the URI says (dbname, expanded) overrides them. The keepalives let
  // an idle connection whose network silently went away be noticed within about a minute.
  const char* keywords[] = {"fallback_application_name",
                            "client_encoding",
                            "keepalives_idle",
                            "keepalives_interval",
                            "keepalives_count",
                            "dbname",
                            nullptr};
  const char* values[] = {"fairlane-notifications", "UTF8", "30", "10", "3", uri.c_str(), nullptr};
  conn = PQconnectStartParams(keywords, values, 1);
  if (conn == nullptr) {
    fail("connecting", "out of memory");
    return;
  }
  if (PQstatus(conn) == CONNECTION_BAD) {
    fail("connecting", tidy(PQerrorMessage(conn)));
    return;
  }
  PQsetNoticeProcessor(conn, ignore_notice, nullptr);
  phase = Phase::connecting;
  timer.expires_after(kConnectDeadline);
  timer.async_wait([weak = weak_from_this(), attempt = attempt](boost::system::error_code error) {
    const auto self = weak.lock();
    if (!self || error || self->attempt != attempt) return;
    if (self->phase == Phase::listening || self->phase == Phase::stopped) return;
    self->fail("connecting", fmt::format("no answer within {} s", kConnectDeadline.count()));
  });
  // libpq's rule for a fresh PQconnectStart: act as if PQconnectPoll said "writing".
  wait(true);
}

void PgNotifications::State::wait(bool write) {
  const int fd = PQsocket(conn);
  if (fd < 0) {
    fail("waiting", tidy(PQerrorMessage(conn)));
    return;
  }
  // The descriptor is made afresh for every wait. While connecting, libpq may close its
  // socket and open another (the next host, a retry without SSL), perhaps under the same
  // number. And Asio's reactor is edge-triggered and does not look at a socket before waiting
  // on it, while PQconsumeInput reads at most a buffer's worth: what it left in the socket
  // would wait for more to arrive. Registering the socket again reports it readable at once.
  if (socket) socket->release();
  socket.emplace(io, fd);
  using Wait = asio::posix::stream_descriptor::wait_type;
  socket->async_wait(write ? Wait::wait_write : Wait::wait_read,
                     [weak = weak_from_this(), attempt = attempt](boost::system::error_code error) {
                       const auto self = weak.lock();
                       if (!self || self->attempt != attempt || self->phase == Phase::stopped) {
                         return;
                       }
                       if (error == asio::error::operation_aborted) return;
                       if (error) {
                         self->fail("waiting", error.message());
                         return;
                       }
                       self->on_ready();
                     });
}

void PgNotifications::State::on_ready() {
  switch (phase) {
    case Phase::connecting:
      poll_connect();
      return;
    case Phase::sending:
      flush();
      return;
    case Phase::reading:
      read_results();
      return;
    case Phase::listening:
      read_notifications();
      return;
    case Phase::pausing:
    case Phase::stopped:
      return;
  }
}

void PgNotifications::State::poll_connect() {
  switch (PQconnectPoll(conn)) {
    case PGRES_POLLING_READING:
      wait(false);
      return;
    case PGRES_POLLING_WRITING:
      wait(true);
      return;
    case PGRES_POLLING_OK:
      send_listens();
      return;
    case PGRES_POLLING_FAILED:
    default:
      fail("connecting", tidy(PQerrorMessage(conn)));
      return;
  }
}

void PgNotifications::State::send_listens() {
  if (PQsetnonblocking(conn, 1) != 0) {
    fail("connecting", tidy(PQerrorMessage(conn)));
    return;
  }
  // LISTEN takes an identifier, not a parameter: each channel is quoted by libpq.
  std::string listens;
  for (const std::string& channel : channels) {
    char* quoted = PQescapeIdentifier(conn, channel.data(), channel.size());
    if (quoted == nullptr) {
      fail("quoting a channel", tidy(PQerrorMessage(conn)));
      return;
    }
    listens += "LISTEN ";
    listens += quoted;
    listens += ';';
    PQfreemem(quoted);
  }
  results_failed = false;
  if (PQsendQuery(conn, listens.c_str()) == 0) {
    fail("sending LISTEN", tidy(PQerrorMessage(conn)));
    return;
  }
  phase = Phase::sending;
  flush();
}

void PgNotifications::State::flush() {
  switch (PQflush(conn)) {
    case 0:
      phase = Phase::reading;
      wait(false);
      return;
    case 1:
      wait(true);
      return;
    default:
      fail("sending LISTEN", tidy(PQerrorMessage(conn)));
      return;
  }
}

void PgNotifications::State::read_results() {
  if (PQconsumeInput(conn) == 0) {
    fail("reading the answer to LISTEN", tidy(PQerrorMessage(conn)));
    return;
  }
  while (PQisBusy(conn) == 0) {
    PGresult* result = PQgetResult(conn);
    if (result == nullptr) {
      if (results_failed) {
        fail("LISTEN", last_error.message());
        return;
      }
      now_listening();
      return;
    }
    if (PQresultStatus(result) != PGRES_COMMAND_OK) {
      results_failed = true;
      last_error = Status(StatusCode::io_error, tidy(PQresultErrorMessage(result)));
    }
    PQclear(result);
  }
  wait(false);
}

void PgNotifications::State::now_listening() {
  phase = Phase::listening;
  timer.cancel();
  failures = 0;
  if (listened_before) ++reconnect_count;
  listened_before = true;
  if (resync) resync();
  if (phase == Phase::stopped) return;
  if (!deliver()) return;
  wait(false);
}

void PgNotifications::State::read_notifications() {
  if (PQconsumeInput(conn) == 0) {
    // What arrived before the loss is still worth handing on.
    if (!deliver()) return;
    fail("listening", tidy(PQerrorMessage(conn)));
    return;
  }
  if (!deliver()) return;
  if (PQstatus(conn) == CONNECTION_BAD) {
    fail("listening", tidy(PQerrorMessage(conn)));
    return;
  }
  wait(false);
}

bool PgNotifications::State::deliver() {
  while (phase != Phase::stopped && conn != nullptr) {
    const std::unique_ptr<PGnotify, NotifyDeleter> notify(PQnotifies(conn));
    if (!notify) break;
    if (handler) handler(notify->relname, notify->extra);
  }
  return phase != Phase::stopped;
}

void PgNotifications::State::fail(std::string_view doing, const std::string& detail) {
  last_error =
      Status(StatusCode::io_error,
             fmt::format("listening for notifications from PostgreSQL at {}: {}: {}; connecting "
                         "again",
                         server, doing, detail));
  close();
  pause();
}

void PgNotifications::State::close() {
  ++attempt;
  if (socket) {
    socket->release();  // libpq's socket: PQfinish closes it
    socket.reset();
  }
  if (conn != nullptr) {
    PQfinish(conn);
    conn = nullptr;
  }
}

void PgNotifications::State::pause() {
  phase = Phase::pausing;
  const auto delay = doubled(kFirstPause, failures, kLongestPause);
  ++failures;
  timer.expires_after(delay);
  timer.async_wait([weak = weak_from_this(), attempt = attempt](boost::system::error_code error) {
    const auto self = weak.lock();
    if (!self || error || self->attempt != attempt || self->phase != Phase::pausing) return;
    self->connect();
  });
}

void PgNotifications::State::stop() {
  if (phase == Phase::stopped) return;
  phase = Phase::stopped;
  timer.cancel();
  close();
}

Result<std::unique_ptr<PgNotifications>> PgNotifications::open(asio::io_context& io,
                                                               const std::string& uri,
                                                               std::vector<std::string> channels,
                                                               Handler handler,
                                                               std::function<void()> resync) {
  if (pg::describe(uri).empty()) {
    return Status(StatusCode::invalid_argument,
                  "listening for notifications: --db is not a connection URI. Write it as "
                  "postgresql://user@host:port/database.");
  }
  if (channels.empty()) {
    return Status(StatusCode::invalid_argument,
                  "listening for notifications: no channel to listen on");
  }
  for (const std::string& channel : channels) {
    if (channel.empty() || channel.size() > kLongestChannel ||
        channel.find('\0') != std::string::npos) {
      return Status(StatusCode::invalid_argument,
                    fmt::format("listening for notifications: the channel name \"{}\" is empty, "
                                "holds a NUL byte or is longer than PostgreSQL's {} bytes",
                                channel, kLongestChannel));
    }
  }
  auto state =
      std::make_shared<State>(io, uri, std::move(channels), std::move(handler), std::move(resync));
  state->connect();
  return std::unique_ptr<PgNotifications>(new PgNotifications(std::move(state)));
}

// As ~State (and the declaration says).
// NOLINTNEXTLINE(bugprone-exception-escape)
PgNotifications::~PgNotifications() {
  state_->stop();
}

bool PgNotifications::listening() const {
  return state_->phase == State::Phase::listening;
}

std::int64_t PgNotifications::reconnects() const {
  return state_->reconnect_count;
}

const Status& PgNotifications::last_error() const {
  return state_->last_error;
}

}  // namespace fairlane::store
