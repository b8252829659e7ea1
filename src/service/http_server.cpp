#include "service/http_server.hpp"
#include "fairlane/listen.hpp"

#include <fmt/format.h>

#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <boost/json.hpp>
#include <iostream>
#include <list>

#include "service/api_json.hpp"

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

http::response<http::string_body> to_beast(const ApiResponse& r, unsigned version,
                                           bool keep_alive) {
  http::response<http::string_body> response{static_cast<http::status>(r.status), version};
  response.set(http::field::server, "fairlane");
  response.set(http::field::content_type, r.content_type);
  for (const auto& [name, value] : r.headers) response.set(name, value);
  response.keep_alive(keep_alive);
  response.body() = r.body;
  response.prepare_payload();
  return response;
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
  Impl(asio::io_context& context, Router& r, HttpLimits l) : io(context), router(r), limits(l) {}

  asio::io_context& io;
  Router& router;
  const HttpLimits limits;
  std::optional<tcp::acceptor> acceptor;
  std::list<std::weak_ptr<beast::tcp_stream>> connections;
  std::size_t open = 0;
  bool stopped = false;

  awaitable<void> accept_loop(std::shared_ptr<Impl> self);
  awaitable<void> session(std::shared_ptr<Impl> self, tcp::socket socket);
};

HttpServer::HttpServer(asio::io_context& io, Router& router, HttpLimits limits)
    : impl_(std::make_shared<Impl>(io, router, limits)) {}

HttpServer::~HttpServer() {
  stop();
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
    if (auto stream = weak.lock()) stream->socket().close(ignored);
  }
  impl_->connections.clear();
}

awaitable<void> HttpServer::Impl::accept_loop(std::shared_ptr<Impl> self) {
  while (acceptor && acceptor->is_open()) {
    boost::system::error_code error;
    tcp::socket socket =
        co_await acceptor->async_accept(asio::redirect_error(use_awaitable, error));
    if (error) {
      if (error == asio::error::operation_aborted || !acceptor->is_open()) co_return;
      continue;
    }
    if (open >= limits.max_connections) {
      socket.close(error);  // bounded: a client beyond the cap is turned away at once
      continue;
    }
    asio::co_spawn(io, session(self, std::move(socket)), report_failure);
  }
}

awaitable<void> HttpServer::Impl::session(std::shared_ptr<Impl> self, tcp::socket socket) {
  const std::shared_ptr<Impl> keep = std::move(self);
  auto stream = std::make_shared<beast::tcp_stream>(std::move(socket));
  connections.remove_if([](const auto& weak) { return weak.expired(); });
  connections.push_back(stream);
  ++open;
  struct Closed {
    std::size_t& open;
    ~Closed() { --open; }
  } closed{open};
  beast::flat_buffer buffer;
  boost::system::error_code error;
  while (!stopped) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
    parser.body_limit(limits.max_body_bytes);
    stream->expires_after(limits.idle_timeout);
    co_await http::async_read_header(*stream, buffer, parser,
                                     asio::redirect_error(use_awaitable, error));
    // A Content-Length over the limit fails already here, with body_limit.
    if (!error) {
      stream->expires_after(limits.read_timeout);
      co_await http::async_read(*stream, buffer, parser,
                                asio::redirect_error(use_awaitable, error));
    }
    if (error == http::error::body_limit) {
      auto response =
          refusal(parser.get().version(), http::status::payload_too_large, "payload_too_large",
                  fmt::format("the body is larger than the {} MB fairlane accepts: "
                              "split the upload",
                              limits.max_body_bytes / (1024 * 1024)));
      co_await http::async_write(*stream, response, asio::redirect_error(use_awaitable, error));
      break;
    }
    if (error == http::error::header_limit) {
      auto response = refusal(11, http::status::request_header_fields_too_large,
                              "headers_too_large", "the request's headers are too large");
      co_await http::async_write(*stream, response, asio::redirect_error(use_awaitable, error));
      break;
    }
    if (error) break;
    stream->expires_never();
    const auto& request = parser.get();
    ApiRequest api{
        std::string(request.method_string()), std::string(request.target()), {}, request.body()};
    for (const auto& field : request) {
      api.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    }
    const bool keep_alive = request.keep_alive();
    auto response = to_beast(router.handle(api), request.version(), keep_alive);
    co_await http::async_write(*stream, response, asio::redirect_error(use_awaitable, error));
    if (error || !keep_alive) break;
  }
  stream->socket().shutdown(tcp::socket::shutdown_send, error);
}

}  // namespace fairlane::service
