// HttpServer: the HTTP/1.1 front of the API, the transport (Beast on Asio coroutines). A
// connection reads a request's headers (with a timeout and a limit on their size), asks the
// Router to admit it, reads a bounded body only then (answering Expect: 100-continue), hands
// the request to the Router, and writes the answer; keep-alive, a cap on connections, and
// stop() for shutdown. Uploads' bodies are read (JSON, multipart, poppler) on a pool of
// worker threads while the io thread goes on; a job's live events are written by
// stream_events (event_stream.hpp). No business rule lives here: the caps on documents
// being read and on event streams are the router's.
//
// Thread safety: the io_context's thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "fairlane/core/result.hpp"
#include "service/router.hpp"

namespace boost::asio {
class io_context;
}

namespace fairlane::service {

// The largest max_header_bytes, and the largest read buffer: Beast keeps a field's size in
// 16 bits and throws (out of the read, ending io_context::run) on a field of 64 KB or more.
// A trailer's fields, which header_limit does not bound, are bounded by the buffer alone.
inline constexpr std::size_t kMaxHeaderBytes = std::size_t{63} * 1024;
inline constexpr std::size_t kMaxReadBuffer = std::size_t{64} * 1024;

struct HttpLimits {
  std::size_t max_body_bytes = std::size_t{100} * 1024 * 1024;  // larger bodies get 413
  // Larger headers get 431, as does a chunk's size line (with its extensions) or a trailer
  // that does not fit whole in the read buffer, which holds this and 4 KB, at most 64 KB
  // (kMaxReadBuffer). At most kMaxHeaderBytes.
  std::size_t max_header_bytes = std::size_t{16} * 1024;
  std::size_t max_connections = 1'000;  // more get a 503 and are closed at once
  // For a whole request, headers and body: from a new connection's start, or from the
  // first byte of a later request on a kept-alive one. Then the connection is closed.
  std::chrono::seconds read_timeout{60};
  std::chrono::seconds idle_timeout{60};  // between requests on a connection
  // For each piece of an answer written: a client that takes none of it for this long (it
  // stopped reading) is given up; one that reads slowly is served.
  std::chrono::seconds write_timeout{30};
  // Live events: a heartbeat comment after this long without an event (it keeps proxies
  // from closing the stream, and finds clients that went away).
  std::chrono::milliseconds heartbeat{15'000};
  // After a change, a stream waits this long before it renders, so that the changes of a
  // busy dispatcher reach a watcher a few times a second, the latest state each time.
  std::chrono::milliseconds event_interval{250};
  // Threads that read uploaded PDFs, off the io thread, and as many again that parse JSON
  // pages (apart, so that PDFs read for long hold no JSON upload up); 0: one per core.
  // (How many PDFs may wait for them is the router's: RouterConfig::max_pending_documents.)
  std::size_t document_threads = 0;
  DocumentReading documents;
};

class HttpServer {
 public:
  // `router` must outlive the server's connections.
  HttpServer(boost::asio::io_context& io, Router& router, const HttpLimits& limits = {});
  // NOLINTNEXTLINE(bugprone-exception-escape): see the definition
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Starts accepting; port 0 picks a free one. Returns the port.
  Result<std::uint16_t> listen(const std::string& address, std::uint16_t port);

  // Stops accepting and closes every connection, but those that owe their client the answer
  // to an upload past the door (committed, or being committed): those are answered first.
  void stop();
  // Runs `done` (posted) once stopped and no connection owes an answer any more: the io
  // thread may stop then without leaving a committed upload unanswered.
  void when_answered(std::function<void()> done);

  // Uploads read whole and waiting for their turn to pass the door while another's commit
  // is out on a reader (with readers only). On the io thread.
  [[nodiscard]] std::size_t uploads_waiting() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace fairlane::service
