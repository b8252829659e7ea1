// The live events of a job on one connection: Server-Sent Events over chunked HTTP/1.1.
#include "service/event_stream.hpp"

#include <array>
#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "service/store_readers.hpp"

namespace fairlane::service {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::awaitable;
using asio::use_awaitable;

namespace {

// Whether the client is still there. A stream only writes, so without a read pending it
// would learn of a client that left only when a write failed: a heartbeat or two later, up
// to minutes, while the client's stream slot stayed taken. A read is kept pending instead:
// the client's close (an end of stream or a reset) ends it, marks the client gone and wakes
// the stream. Bytes the client sends meanwhile (its next request, pipelined) end the watch
// too; they go to the session's buffer for that request once the stream ends. The read owns
// what it uses (the connection, its bytes): a stream ended by an exception leaves it
// nothing freed under it.
struct ClientWatch {
  explicit ClientWatch(const asio::any_io_executor& executor) : ended(executor) {
    ended.expires_at(asio::steady_timer::time_point::max());
  }
  bool reading = true;
  bool stop = false;  // the stream has ended: a read not yet started is not started
  bool gone = false;
  std::array<char, 4096> bytes{};
  std::size_t read = 0;
  asio::steady_timer ended;  // cancelled once the read has ended
};

awaitable<void> watch_client(std::shared_ptr<beast::tcp_stream> stream,
                             std::shared_ptr<ClientWatch> watch,
                             std::shared_ptr<asio::steady_timer> wake) {
  boost::system::error_code error;
  // Spawned, this starts once the stream first waits; a stream that ended before then (its
  // job unreadable at once) has no read to cancel, and would wait for one the client ends.
  if (!watch->stop) {
    // Timed by nothing (the writes are, by the write timeout): set here, as the read
    // starts, so that no write's timeout set before it can be the read's.
    stream->expires_never();
    watch->read = co_await stream->async_read_some(asio::buffer(watch->bytes),
                                                   asio::redirect_error(use_awaitable, error));
  }
  if (error && error != asio::error::operation_aborted) {
    watch->gone = true;
    wake->cancel();
  }
  watch->reading = false;
  watch->ended.cancel();
}

}  // namespace

awaitable<bool> stream_events(const std::shared_ptr<beast::tcp_stream>& connection,
                              beast::flat_buffer& buffer, Router& router, EventStream events,
                              unsigned version, bool keep_alive, const HttpLimits& limits,
                              const bool& stopped) {
  beast::tcp_stream& stream = *connection;
  boost::system::error_code error;
  // HTTP/1.1 gets a chunked stream; an HTTP/1.0 client gets the bytes and a close at the end.
  const bool chunked = version >= 11;
  http::response<http::empty_body> head{http::status::ok, version};
  head.set(http::field::server, "fairlane");
  head.set(http::field::content_type, "text/event-stream");
  head.set(http::field::cache_control, "no-cache");
  head.set("X-Accel-Buffering", "no");  // nginx: pass events through as they come
  head.keep_alive(chunked && keep_alive);
  head.chunked(chunked);
  http::response_serializer<http::empty_body> serializer{head};
  stream.expires_after(limits.write_timeout);
  co_await http::async_write_header(stream, serializer, asio::redirect_error(use_awaitable, error));

  // The heartbeat is due `heartbeat` after the last write, whatever woke the stream since.
  auto last_write = std::chrono::steady_clock::now();
  const auto send = [&](const std::string& text) -> awaitable<void> {
    stream.expires_after(limits.write_timeout);
    if (chunked) {
      const auto chunk = http::make_chunk(asio::buffer(text));
      co_await asio::async_write(stream, chunk, asio::redirect_error(use_awaitable, error));
    } else {
      const auto bytes = asio::buffer(text);
      co_await asio::async_write(stream, bytes, asio::redirect_error(use_awaitable, error));
    }
    last_write = std::chrono::steady_clock::now();
  };

  // A reconnecting EventSource waits 2 s; each event carries the whole job, so a new
  // stream starts with the state as it is and needs no Last-Event-ID.
  const std::string preamble = "retry: 2000\n\n";
  if (!error) co_await send(preamble);
  // The wake-up: parked with the router's watchers, cancelled by a change.
  auto wake = std::make_shared<asio::steady_timer>(stream.get_executor());
  // Bytes already in the buffer are the client's next request: no read is needed to see it
  // there, and the stream goes unwatched.
  auto watch = std::make_shared<ClientWatch>(stream.get_executor());
  if (buffer.size() == 0) {
    asio::co_spawn(stream.get_executor(), watch_client(connection, watch, wake), asio::detached);
  } else {
    watch->reading = false;
  }
  // The read ends before this does, and what it read goes to the session's buffer: the
  // session reads the connection next.
  const auto end_watch = [&]() -> awaitable<void> {
    boost::system::error_code ignored;
    watch->stop = true;
    if (watch->reading) {
      stream.socket().cancel(ignored);
      co_await watch->ended.async_wait(asio::redirect_error(use_awaitable, ignored));
    }
    const auto room = buffer.prepare(watch->read);
    buffer.commit(asio::buffer_copy(room, asio::buffer(watch->bytes.data(), watch->read)));
  };
  std::string last;
  bool ended = false;
  while (!error && !stopped && !watch->gone) {
    // Changes notified while this render is written find nobody parked: the count shows them.
    const std::uint64_t seen = router.watchers().changes();
    std::optional<JobEvent> event;
    if (StoreReaders* readers = router.readers()) {
      // The job read on a reader's connection, rendered here (its position and ETA).
      std::optional<Result<JobView>> job;
      co_await read_on(*readers, [&](Store& store) { job.emplace(store.job(events.job)); });
      if (stopped || watch->gone) break;
      event = router.job_event(events, *job);
    } else {
      event = router.job_event(events);
    }
    if (!event) break;  // the job cannot be read any more
    if (event->data != last) {
      const std::string text = "event: job\ndata: " + event->data + "\n\n";
      co_await send(text);
      last = event->data;
    }
    if (event->ended) {
      ended = true;
      break;
    }
    // A close seen while this event was rendered or written woke nothing parked.
    if (error || watch->gone) break;
    boost::system::error_code waited;
    if (router.watchers().changes() != seen) {
      wake->expires_after(limits.event_interval);
      co_await wake->async_wait(asio::redirect_error(use_awaitable, waited));
      continue;
    }
    wake->expires_at(last_write + limits.heartbeat);
    const Watchers::Ticket ticket =
        router.watchers().park([weak = std::weak_ptr<asio::steady_timer>(wake)] {
          if (auto timer = weak.lock()) timer->cancel();
        });
    co_await wake->async_wait(asio::redirect_error(use_awaitable, waited));
    router.watchers().unpark(ticket);
    if (stopped || watch->gone) break;
    if (!waited) {
      const std::string heartbeat = ": heartbeat\n\n";
      co_await send(heartbeat);
      continue;
    }
    // Woken by a change: let the next few gather, then render the latest.
    wake->expires_after(limits.event_interval);
    co_await wake->async_wait(asio::redirect_error(use_awaitable, waited));
  }
  co_await end_watch();
  if (error || stopped || watch->gone || !chunked) co_return false;
  stream.expires_after(limits.write_timeout);
  const auto last_chunk = http::make_chunk_last();
  co_await asio::async_write(stream, last_chunk, asio::redirect_error(use_awaitable, error));
  co_return !error && ended;
}

}  // namespace fairlane::service
