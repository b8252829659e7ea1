// PgNotifications: PostgreSQL's LISTEN/NOTIFY on an Asio io_context, without blocking it. It
// keeps a connection of its own, LISTENs on a fixed set of channels and runs a handler for
// each notification that arrives. The connection is driven as the provider client drives
// libcurl: its socket (PQsocket) is waited on with async_wait, and libpq is only called when
// the socket is ready (PQconnectPoll while connecting, PQconsumeInput and PQnotifies after),
// so no call waits for the server.
//
// When the connection is lost (the server restarts, its backend is terminated, the network
// breaks) it connects again after a pause (100 ms, doubling up to 5 s, back to 100 ms once
// listening), LISTENs again, and runs `resync`: what was notified meanwhile is lost for good,
// so the owner re-reads what it follows. `resync` runs each time the LISTENs take effect, the
// first time included, since whatever was notified before that was not seen either.
//
// Thread safety: none. Everything runs on the thread running the io_context, which is also
// the thread that must destroy it (or destroy it while the io_context is not running).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fairlane/core/result.hpp"
#include "fairlane/core/status.hpp"

namespace boost::asio {
class io_context;
}

namespace fairlane::store {

class PgNotifications {
 public:
  // One notification: its channel and payload, valid only during the call.
  using Handler = std::function<void(std::string_view channel, std::string_view payload)>;

  // Starts connecting to `uri` (any libpq URI or key=value string) and returns at once (only
  // the lookup of a host name, inside libpq, may block); from then on the io_context does the
  // work. `handler` and `resync` run on the io_context's thread and must not throw: an
  // exception would leave the listener deaf, with no wait pending. The connection's
  // application_name is "fairlane-notifications" unless the URI names one. A URI that does not
  // parse, no channel, or a channel that is empty, holds a NUL or is longer than PostgreSQL's 63
  // bytes is invalid_argument. A server that cannot be reached is not an error here: it is tried
  // again, with the pauses above, until it answers (listening() and last_error() tell).
  static Result<std::unique_ptr<PgNotifications>> open(boost::asio::io_context& io,
                                                       const std::string& uri,
                                                       std::vector<std::string> channels,
                                                       Handler handler,
                                                       std::function<void()> resync);

  PgNotifications(const PgNotifications&) = delete;
  PgNotifications& operator=(const PgNotifications&) = delete;
  // Closes the connection and stops waiting: no handler or resync runs once it returns, even
  // when destroyed from inside one of them. (Asio's cancel() and release() throw only when the
  // reactor itself fails: std::terminate is right then.)
  // NOLINTNEXTLINE(bugprone-exception-escape)
  ~PgNotifications();

  // Connected, and every LISTEN has taken effect.
  [[nodiscard]] bool listening() const;
  // How many times it listened again after losing a connection.
  [[nodiscard]] std::int64_t reconnects() const;
  // Why the last connection failed or was lost (io_error, naming the server); ok before any.
  [[nodiscard]] const Status& last_error() const;

  struct State;  // shared with the waits in flight, which hold it weakly

 private:
  explicit PgNotifications(std::shared_ptr<State> state) : state_(std::move(state)) {}

  std::shared_ptr<State> state_;
};

}  // namespace fairlane::store
