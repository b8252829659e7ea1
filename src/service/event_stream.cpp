// The live events of a job on one connection: Server-Sent Events over chunked HTTP/1.1.
#include "service/event_stream.hpp"

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

awaitable<bool> stream_events(beast::tcp_stream& stream, Router& router, EventStream events,
                              unsigned version, bool keep_alive, const HttpLimits& limits,
                              const bool& stopped) {
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
  std::string last;
  bool ended = false;
  while (!error && !stopped) {
    // Changes notified while this render is written find nobody parked: the count shows them.
    const std::uint64_t seen = router.watchers().changes();
    std::optional<JobEvent> event;
    if (StoreReaders* readers = router.readers()) {
      // The job read on a reader's connection, rendered here (its position and ETA).
      std::optional<Result<JobView>> job;
      co_await read_on(*readers, [&](Store& store) { job.emplace(store.job(events.job)); });
      if (stopped) break;
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
    if (error) break;
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
    if (stopped) break;
    if (!waited) {
      const std::string heartbeat = ": heartbeat\n\n";
      co_await send(heartbeat);
      continue;
    }
    // Woken by a change: let the next few gather, then render the latest.
    wake->expires_after(limits.event_interval);
    co_await wake->async_wait(asio::redirect_error(use_awaitable, waited));
  }
  if (error || stopped || !chunked) co_return false;
  stream.expires_after(limits.write_timeout);
  const auto last_chunk = http::make_chunk_last();
  co_await asio::async_write(stream, last_chunk, asio::redirect_error(use_awaitable, error));
  co_return !error && ended;
}

}  // namespace fairlane::service
