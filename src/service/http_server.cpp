#include "service/http_server.hpp"
#include "provider/listen.hpp"

#include <fmt/format.h>

#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <boost/json.hpp>
#include <deque>
#include <functional>
#include <iostream>
#include <list>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "service/api_json.hpp"
#include "service/event_stream.hpp"
#include "service/store_readers.hpp"

namespace fairlane::service {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using asio::awaitable;
using asio::use_awaitable;

// Reports, rather than swallows, an exception that ends a coroutine.
constexpr ReportFailure report_failure{"fairlane: a connection failed"};

// Runs on a worker thread: reads the upload's body into `out`, which the awaiting session
// owns.
awaitable<void> read_on_worker(DocumentUpload upload, const DocumentReading& reading,
                               ReaderProcesses& processes, std::optional<UploadRead>& out) {
  out.emplace(read_upload(std::move(upload), reading, &processes));
  co_return;
}

// The request as the API sees it, without its body.
ApiRequest api_request(const http::request_parser<http::string_body>& parser) {
  const auto& request = parser.get();
  ApiRequest api{std::string(request.method_string()), std::string(request.target()), {}, {}};
  for (const auto& field : request) {
    api.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  // As the parser reads them (a Content-Length may be a list of equal values, for one).
  if (const auto length = parser.content_length()) {
    api.announced_bytes = *length;
  } else if (!parser.chunked()) {
    api.announced_bytes = 0;
  }
  return api;
}

// `head_only`: the answer to a HEAD, its headers as a GET's (its Content-Length included),
// and no body (RFC 9110, 9.3.2).
http::response<http::string_body> to_beast(const ApiResponse& r, unsigned version, bool keep_alive,
                                           bool head_only = false) {
  http::response<http::string_body> response{static_cast<http::status>(r.status), version};
  response.set(http::field::server, "fairlane");
  if (!r.content_type.empty()) response.set(http::field::content_type, r.content_type);
  for (const auto& [name, value] : r.headers) response.set(name, value);
  response.keep_alive(keep_alive);
  response.body() = r.body;
  response.prepare_payload();
  if (head_only) response.body().clear();
  return response;
}

// Writes `message` a piece at a time, each piece within `timeout`: a client that takes none
// of it for that long is given up, one that reads slowly is not. (One deadline for the whole
// write cut a 48 MB result off after 30 s from a client reading at 1 MB/s.)
template <class Body>
awaitable<void> write_message(beast::tcp_stream& stream, http::response<Body>& message,
                              std::chrono::seconds timeout, boost::system::error_code& error) {
  http::response_serializer<Body> serializer(message);
  do {
    stream.expires_after(timeout);
    co_await http::async_write_some(stream, serializer, asio::redirect_error(use_awaitable, error));
  } while (!error && !serializer.is_done());
}

// Ends a connection answered before its request's body was read (a refusal from the headers,
// or a read stopped at a limit) without losing that answer. Closed with the client's bytes
// unread, the connection is reset, and a client still sending (one that sends its whole
// body before it reads, as Python's http.client does) meets a broken pipe, not the answer.
// So this side's end is sent after the answer, and what comes is read and dropped until the
// client closes, or until `until`: the request's own read deadline, the time it had to send
// all of it anyway. A lingering close, as nginx's lingering_close.
awaitable<void> linger(beast::tcp_stream& stream, beast::flat_buffer& buffer,
                       std::chrono::steady_clock::time_point until) {
  boost::system::error_code error;
  stream.socket().shutdown(tcp::socket::shutdown_send, error);
  if (error) co_return;
  stream.expires_at(until);
  buffer.clear();
  while (!error) {
    co_await stream.async_read_some(buffer.prepare(buffer.max_size()),
                                    asio::redirect_error(use_awaitable, error));
  }
}

// A failure on the service's side was answered in the caller's terms: what it really was,
// which names the store's server or file, goes to the operator's log.
void tell_operator(const ApiResponse& r) {
  if (!r.log.empty()) std::cerr << fmt::format("fairlane: answered {}: {}\n", r.status, r.log);
}

http::response<http::string_body> refusal(unsigned version, http::status status,
                                          std::string_view type, std::string_view message) {
  ApiResponse r;
  r.status = static_cast<int>(status);
  r.body = boost::json::serialize(error_json(type, message));
  return to_beast(r, version, false);
}

}  // namespace

struct HttpServer::Impl : std::enable_shared_from_this<Impl> {
  Impl(asio::io_context& context, Router& r, HttpLimits l)
      : io(context),
        router(r),
        limits(std::move(l)),
        threads(limits.document_threads > 0
                    ? limits.document_threads
                    : std::max<std::size_t>(1, std::thread::hardware_concurrency())),
        pdf_workers(threads),
        json_workers(threads) {}

  // With readers, an upload's commit goes off this thread: from its door (finish_upload) to
  // its lane (the commit's answer, made back here) one upload at a time, so that the door
  // never decides without a job being committed. The others wait here, in order.
  struct UploadTurns {
    bool taken = false;
    std::deque<std::shared_ptr<asio::steady_timer>> waiting;
  };
  // Holds the turn until it goes; then the next waiting upload has it (none once stopped).
  class Turn {
   public:
    explicit Turn(Impl& impl) : impl_(&impl) {}
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;
    Turn(Turn&&) = delete;
    Turn& operator=(Turn&&) = delete;
    // Asio's cancel() throws only when the reactor itself fails: std::terminate is right then.
    // NOLINTNEXTLINE(bugprone-exception-escape)
    ~Turn() { impl_->give_turn(); }

   private:
    Impl* impl_;
  };

  asio::io_context& io;
  Router& router;
  const HttpLimits limits;
  const std::size_t threads;
  // Read uploads' bodies: PDFs (a thread waits for each one's reader process, up to
  // --pdf-timeout), and apart from them JSON pages, which a user's PDFs must not hold up.
  asio::thread_pool pdf_workers;
  asio::thread_pool json_workers;
  ReaderProcesses processes;  // their reader processes, killed by stop()
  std::optional<tcp::acceptor> acceptor;
  std::list<std::weak_ptr<beast::tcp_stream>> connections;
  std::size_t open = 0;
  // Kept-alive connections resting between requests, the longest resting first. A
  // connection past max_connections takes the place of the first one still open, which is
  // closed (HTTP lets a server close an idle persistent connection; its client opens
  // another), as nginx reuses them: resting clients do not lock new ones out.
  std::list<std::weak_ptr<beast::tcp_stream>> resting;
  // Closes the connection that has rested longest, if one still rests; whether one did.
  bool close_resting();
  bool stopped = false;
  UploadTurns turns;
  // Connections that owe their client the answer to an upload past the door (committed, or
  // being committed): stop() leaves them open until it is written, and when_answered()'s
  // callbacks run once none is left.
  std::unordered_set<const beast::tcp_stream*> owing;
  std::vector<std::function<void()>> answered;
  class Owing {
   public:
    Owing(Impl& impl, const beast::tcp_stream* stream) : impl_(&impl), stream_(stream) {
      impl_->owing.insert(stream_);
    }
    Owing(const Owing&) = delete;
    Owing& operator=(const Owing&) = delete;
    Owing(Owing&&) = delete;
    Owing& operator=(Owing&&) = delete;
    // Asio's post() throws only when memory runs out: std::terminate is right then.
    // NOLINTNEXTLINE(bugprone-exception-escape)
    ~Owing() {
      impl_->owing.erase(stream_);
      if (impl_->stopped) impl_->tell_answered();
    }

   private:
    Impl* impl_;
    const beast::tcp_stream* stream_;
  };
  // Once stopped and no connection owes an answer: runs when_answered()'s callbacks, posted.
  void tell_answered();

  awaitable<void> accept_loop(std::shared_ptr<Impl> self);
  bool accept_failing = false;  // since the last accept that worked
  // Answers 503 to a connection past max_connections, without waiting, and closes it.
  void refuse_connection(tcp::socket& socket) const;
  // The answer to a read that failed for a reason the client should hear (a body or headers
  // over the limit, a request that is not HTTP/1.1), or nullopt.
  [[nodiscard]] std::optional<http::response<http::string_body>> refusal_for(
      const boost::system::error_code& error, unsigned version) const;
  awaitable<void> session(std::shared_ptr<Impl> self, tcp::socket socket);
  // Resolves an answer that needs the store read first (ApiResponse::read) on a reader.
  awaitable<void> read_first(ApiResponse& answer) const;
  // Waits for the upload turn (UploadTurns); resumes holding it.
  awaitable<void> take_turn();
  void give_turn();
};

awaitable<void> HttpServer::Impl::read_first(ApiResponse& answer) const {
  if (!answer.read) co_return;
  // Read on a reader's connection while the io thread goes on; answered here, even once
  // stopped: an upload's commit made there is owed its 202 (a connection stop() closed
  // fails to write its answer, and ends).
  std::function<ApiResponse()> then;
  const auto read = std::move(answer.read);
  co_await read_on(*router.readers(), [&](Store& store) { then = read->read(store); });
  answer = then();
}

void HttpServer::Impl::tell_answered() {
  if (!owing.empty()) return;
  for (auto& callback : std::exchange(answered, {})) asio::post(io, std::move(callback));
}

awaitable<void> HttpServer::Impl::take_turn() {
  if (!turns.taken) {
    turns.taken = true;
    co_return;
  }
  auto wake = std::make_shared<asio::steady_timer>(io, asio::steady_timer::time_point::max());
  turns.waiting.push_back(wake);
  boost::system::error_code ignored;
  co_await wake->async_wait(asio::redirect_error(use_awaitable, ignored));
  // Handed over by give_turn(), which left `taken` set; or woken by stop().
}

void HttpServer::Impl::give_turn() {
  if (stopped || turns.waiting.empty()) {
    turns.taken = false;
    return;
  }
  const auto next = std::move(turns.waiting.front());
  turns.waiting.pop_front();
  next->cancel();
}

HttpServer::HttpServer(asio::io_context& io, Router& router, const HttpLimits& limits)
    : impl_(std::make_shared<Impl>(io, router, limits)) {}

// stop() cancels the timers of the uploads waiting for their turn: Asio's cancel() throws only
// when the reactor itself fails, and std::terminate is right then.
// NOLINTNEXTLINE(bugprone-exception-escape)
HttpServer::~HttpServer() {
  stop();
  // Reads still running end soon: their reader processes were killed, and those not started
  // return at once. (With no reader process, a read in progress finishes first.)
  if (impl_) {
    impl_->pdf_workers.join();
    impl_->json_workers.join();
  }
}

Result<std::uint16_t> HttpServer::listen(const std::string& address, std::uint16_t port) {
  auto opened = open_acceptor(impl_->io, address, port);
  if (!opened.ok()) return opened.status();
  tcp::acceptor acceptor = std::move(opened).value();
  const std::uint16_t bound = acceptor.local_endpoint().port();
  impl_->acceptor.emplace(std::move(acceptor));
  asio::co_spawn(impl_->io, impl_->accept_loop(impl_), report_failure);
  return bound;
}

void HttpServer::stop() {
  if (!impl_ || impl_->stopped) return;
  impl_->stopped = true;
  boost::system::error_code ignored;
  if (impl_->acceptor) impl_->acceptor->close(ignored);
  for (auto& weak : impl_->connections) {
    const auto stream = weak.lock();
    if (stream && !impl_->owing.contains(stream.get())) stream->socket().close(ignored);
  }
  impl_->connections.clear();
  impl_->router.watchers().notify();  // parked event streams see `stopped` and end
  // Uploads waiting for their turn see `stopped` and close.
  for (const auto& waiting : impl_->turns.waiting) waiting->cancel();
  impl_->turns.waiting.clear();
  // Uploads being read end now; their sessions resume, see `stopped` and close.
  impl_->processes.stop();
}

void HttpServer::when_answered(std::function<void()> done) {
  impl_->answered.push_back(std::move(done));
  if (impl_->stopped) impl_->tell_answered();
}

std::size_t HttpServer::uploads_waiting() const {
  return impl_ ? impl_->turns.waiting.size() : 0;
}

awaitable<void> HttpServer::Impl::accept_loop(std::shared_ptr<Impl> self) {
  while (acceptor && acceptor->is_open()) {
    boost::system::error_code error;
    tcp::socket socket =
        co_await acceptor->async_accept(asio::redirect_error(use_awaitable, error));
    if (error) {
      if (error == asio::error::operation_aborted || !acceptor->is_open()) co_return;
      // Out of descriptors (EMFILE, ENFILE) or memory: the connection stays in the backlog
      // and the listener readable, so accepting again at once would spin the io thread,
      // which also dispatches. Said once a spell, and tried again every 100 ms.
      if (!accept_failing) {
        std::string_view remedy;
        if (error == asio::error::no_descriptors) {  // EMFILE: this process's limit
          remedy =
              ": raise the open-file limit (ulimit -n, LimitNOFILE=) or lower "
              "--max-connections";
        } else if (error == boost::system::errc::too_many_files_open_in_system) {  // ENFILE
          remedy =
              ": the system is out of open files (raise fs.file-max, or lower "
              "--max-connections)";
        }
        std::cerr << fmt::format(
            "fairlane: accepting connections failed ({}){}; trying again every 100 ms\n",
            error.message(), remedy);
      }
      accept_failing = true;
      asio::steady_timer pause(io, std::chrono::milliseconds(100));
      co_await pause.async_wait(asio::redirect_error(use_awaitable, error));
      continue;
    }
    if (accept_failing) std::cerr << "fairlane: accepting connections again\n";
    accept_failing = false;
    if (open >= limits.max_connections && !close_resting()) {
      // Bounded: a client beyond the cap is turned away at once, with a 503 if its socket
      // takes the few bytes now (never waiting for it), so it knows why. (A resting one
      // closed for it ends at the io thread's next turn: the count is over the cap until
      // then, by the connections closed so.)
      refuse_connection(socket);
      continue;
    }
    ++open;  // counted here, not when the session starts, so a burst cannot pass the cap
    asio::co_spawn(io, session(self, std::move(socket)), report_failure);
  }
}

bool HttpServer::Impl::close_resting() {
  for (const auto& weak : resting) {
    const auto stream = weak.lock();
    if (!stream || !stream->socket().is_open()) continue;  // closed already, ending
    boost::system::error_code ignored;
    stream->socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream->close();  // its rest's read ends, and the session with it
    return true;
  }
  return false;
}

void HttpServer::Impl::refuse_connection(tcp::socket& socket) const {
  const std::string answer = [this] {
    const std::string body = boost::json::serialize(
        error_json("busy", fmt::format("fairlane has {} connections open, as many as it takes "
                                       "(--max-connections): retry in a second",
                                       limits.max_connections)));
    return fmt::format(
        "HTTP/1.1 503 Service Unavailable\r\nServer: fairlane\r\nContent-Type: "
        "application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: "
        "{}\r\n\r\n{}",
        body.size(), body);
  }();
  boost::system::error_code ignored;
  socket.non_blocking(true, ignored);
  socket.write_some(asio::buffer(answer), ignored);
  socket.shutdown(tcp::socket::shutdown_both, ignored);
  socket.close(ignored);
}

std::optional<http::response<http::string_body>> HttpServer::Impl::refusal_for(
    const boost::system::error_code& error, unsigned version) const {
  if (error == http::error::body_limit) {
    return refusal(version, http::status::payload_too_large, "payload_too_large",
                   fmt::format("the body is larger than the {} MB fairlane accepts "
                               "(--max-body-mb): split the upload",
                               limits.max_body_bytes / (std::size_t{1024} * 1024)));
  }
  if (error == http::error::header_limit || error == http::error::buffer_overflow) {
    // buffer_overflow: a chunk's size line or the trailer, which the buffer bounds.
    return refusal(11, http::status::request_header_fields_too_large, "headers_too_large",
                   fmt::format("the request's headers (or a chunked body's chunk header or "
                               "trailer, which may be 4 KB more) are larger than the {} KB "
                               "fairlane accepts (--max-header-kb): send fewer or shorter ones",
                               limits.max_header_bytes / 1024));
  }
  if (error.category() == http::make_error_code(http::error::bad_method).category() &&
      error != http::error::end_of_stream && error != http::error::partial_message) {
    // Not HTTP/1.1 as Beast reads it: a bad request line, header, length or chunk.
    return refusal(11, http::status::bad_request, "bad_request",
                   fmt::format("the request is not valid HTTP/1.1 ({})", error.message()));
  }
  return std::nullopt;
}

awaitable<void> HttpServer::Impl::session(std::shared_ptr<Impl> self, tcp::socket socket) {
  const std::shared_ptr<Impl> keep = std::move(self);
  auto stream = std::make_shared<beast::tcp_stream>(std::move(socket));
  connections.remove_if([](const auto& weak) { return weak.expired(); });
  connections.push_back(stream);
  struct Closed {
    std::size_t& open;
    ~Closed() { --open; }
  } closed{open};
  // Bounded: what must be read whole before it is parsed (the headers, a chunk's size line
  // with its extensions, the trailer) fails with buffer_overflow past it, a 431. Unbounded,
  // a chunk extension sent for ever grew it for ever. A body's bytes pass through.
  beast::flat_buffer buffer(std::min(limits.max_header_bytes + 4096, kMaxReadBuffer));
  boost::system::error_code error;
  bool first = true;
  std::chrono::steady_clock::time_point read_deadline;
  bool body_unread = false;  // answered before the request's body was read: linger()
  while (!stopped) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(
        static_cast<std::uint32_t>(std::min(limits.max_header_bytes, kMaxHeaderBytes)));
    parser.body_limit(limits.max_body_bytes);
    if (!first && buffer.size() == 0) {
      // Between requests a kept-alive connection may rest, up to the idle timeout, until
      // the next one's first byte.
      stream->expires_after(limits.idle_timeout);
      struct Resting {
        std::list<std::weak_ptr<beast::tcp_stream>>& list;
        std::list<std::weak_ptr<beast::tcp_stream>>::iterator at;
        ~Resting() { list.erase(at); }
      } rest{resting, resting.insert(resting.end(), stream)};
      const std::size_t n = co_await stream->async_read_some(
          buffer.prepare(4096), asio::redirect_error(use_awaitable, error));
      if (error) break;
      buffer.commit(n);
    }
    first = false;
    // A request, headers and body, arrives whole within the read timeout (from the
    // connection's start, or from its first byte), however slowly it trickles: a client
    // that sends a byte now and then cannot hold a connection for longer.
    read_deadline = std::chrono::steady_clock::now() + limits.read_timeout;
    stream->expires_at(read_deadline);
    co_await http::async_read_header(*stream, buffer, parser,
                                     asio::redirect_error(use_awaitable, error));
    // A Content-Length over the limit fails already here, with body_limit.
    if (auto refusal = refusal_for(error, parser.get().version())) {
      co_await write_message(*stream, *refusal, limits.write_timeout, error);
      body_unread = !error;
      break;
    }
    if (error) break;
    // Who sends it, and whether it may be read at all, from its headers alone: no key, no
    // body. An answer given now closes the connection unless there was no body to skip.
    const unsigned version = parser.get().version();
    const bool keep_alive = parser.get().keep_alive();
    ApiRequest api = api_request(parser);
    // A HEAD is routed as the GET it asks about; its answer goes without the body.
    const bool head_only = api.method == "HEAD";
    if (head_only) {
      api.method = "GET";
      api.head_only = true;
    }
    auto admitted = router.admit(api);
    // An upload counts as on its way, with its body's bytes, from its headers until its
    // body (and a document's pages) has been read.
    std::shared_ptr<const void> on_its_way;
    if (auto* caller = std::get_if<Caller>(&admitted)) {
      on_its_way = std::exchange(caller->on_its_way, {});
    }
    if (auto* answer = std::get_if<ApiResponse>(&admitted)) {
      const bool reusable = keep_alive && parser.is_done();
      tell_operator(*answer);
      auto response = to_beast(*answer, version, reusable, head_only);
      co_await write_message(*stream, response, limits.write_timeout, error);
      body_unread = !error && !parser.is_done();
      if (error || !reusable) break;
      continue;
    }
    if (!parser.is_done()) {
      if (iequals(parser.get()[http::field::expect], "100-continue")) {
        // The key and the size passed: the client may send the body now.
        http::response<http::empty_body> go_on{http::status::continue_, version};
        co_await write_message(*stream, go_on, limits.write_timeout, error);
        if (error) break;
        stream->expires_at(read_deadline);  // the request's own deadline, as before the 100
      }
      co_await http::async_read(*stream, buffer, parser,
                                asio::redirect_error(use_awaitable, error));
      if (auto refusal = refusal_for(error, version)) {
        on_its_way.reset();  // no longer on its way, while its refusal is written
        co_await write_message(*stream, *refusal, limits.write_timeout, error);
        body_unread = !error;
        break;
      }
      if (error) break;
    }
    stream->expires_never();
    api.body = std::move(parser.get().body());  // an upload can be 100 MB: moved, not copied
    std::optional<Owing> owed;                  // from an upload's door to its answer written
    ApiResponse answer = router.handle(std::move(api), std::get<Caller>(admitted));
    if (!answer.document) on_its_way.reset();  // answered now: it is no longer on its way
    co_await read_first(answer);
    if (answer.document) {
      // Read on a worker; the answer comes back to this thread, which enqueues it. The
      // reading slot is held here, and given back on this thread once the upload is
      // committed or refused: until then its pages wait in memory (for the turn to commit,
      // with readers), as large as their text or images, and the slots bound them. Its
      // place among those on their way is given back once it has its turn to commit, before
      // it is answered, which counts only the others. Until then it is on its way: an upload
      // committed meanwhile waits for it in its promise window.
      DocumentUpload upload = std::move(*answer.document);
      auto slot = std::exchange(upload.slot, {});  // a PDF's (JSON pages take none)
      const Upload who = upload.upload;
      std::optional<UploadRead> read;
      co_await asio::co_spawn(slot ? pdf_workers.get_executor() : json_workers.get_executor(),
                              read_on_worker(std::move(upload), limits.documents, processes, read),
                              use_awaitable);
      if (stopped) break;
      std::optional<Turn> turn;
      if (router.readers() != nullptr) {
        co_await take_turn();
        turn.emplace(*this);
        if (stopped) break;
      }
      on_its_way.reset();
      // Past the door from here: committed (or being committed), so owed its answer.
      owed.emplace(*this, stream.get());
      answer = router.finish_upload(who, std::move(*read));
      co_await read_first(answer);
      slot.reset();
    }
    if (answer.promise_hold) {
      // Accepted and committed: the 202 waits for the uploads that come with it, so that
      // its promise counts them (PromiseWindow). A stop does not cut it short: it is brief.
      asio::steady_timer hold(stream->get_executor(), answer.promise_hold->wait);
      boost::system::error_code ignored;
      co_await hold.async_wait(asio::redirect_error(use_awaitable, ignored));
      answer = router.close_promise(*answer.promise_hold);
    }
    // A HEAD of a live-event stream is told the stream's headers, and no stream is opened.
    if (head_only) answer.events.reset();
    if (answer.events) {
      const bool reusable = co_await stream_events(stream, buffer, router, *answer.events, version,
                                                   keep_alive, limits, stopped);
      if (!reusable || !keep_alive) break;
      continue;
    }
    tell_operator(answer);
    auto response = to_beast(answer, version, keep_alive, head_only);
    co_await write_message(*stream, response, limits.write_timeout, error);
    if (error || !keep_alive) break;
  }
  if (body_unread && !stopped) {
    co_await linger(*stream, buffer, read_deadline);
  } else {
    stream->socket().shutdown(tcp::socket::shutdown_send, error);
  }
}

}  // namespace fairlane::service
