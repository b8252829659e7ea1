// The live events of one job on one connection (GET /v1/jobs/{id}/events, as Server-Sent
// Events: chunked text/event-stream): the job object whenever it changed (rendered by the
// router's job_event() each time its watchers are woken, at most every event_interval), a
// comment line as a heartbeat when nothing did, and the end of the stream after the event
// that shows the job ended. The transport (HttpServer) hands a stream here once the router
// granted it; the cap on streams is the router's (StreamSlots).
//
// Thread safety: the io_context's thread.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <memory>

#include "service/http_server.hpp"
#include "service/router.hpp"

namespace fairlane::service {

// Streams `events` on `connection` until the job ends, the client goes (closes its side: a
// read is kept pending to see it), or `stopped` turns true (the server stops: it notifies
// the router's watchers so that a parked stream sees it). `buffer` is the session's: what
// the client sends meanwhile is put there for its next request. Returns whether the
// connection may carry another request.
boost::asio::awaitable<bool> stream_events(
    const std::shared_ptr<boost::beast::tcp_stream>& connection, boost::beast::flat_buffer& buffer,
    Router& router, EventStream events, unsigned version, bool keep_alive, const HttpLimits& limits,
    const bool& stopped);

}  // namespace fairlane::service
