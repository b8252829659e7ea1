// What the service's HTTP server and the provider stand-in share around Asio: opening a
// listening socket with an error that names the address, and reporting (not swallowing)
// an exception that ends a coroutine started with co_spawn.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>

#include "fairlane/core/result.hpp"

namespace fairlane {

// Opens, binds (with reuse_address) and listens on address:port; port 0 takes any free one.
[[nodiscard]] Result<boost::asio::ip::tcp::acceptor> open_acceptor(boost::asio::io_context& io,
                                                                   const std::string& address,
                                                                   std::uint16_t port);

// A co_spawn completion handler: writes "<label>: <what>" to stderr when the coroutine
// ended with an exception, e.g. ReportFailure{"fairlane: a connection failed"}.
struct ReportFailure {
  std::string_view label;
  void operator()(const std::exception_ptr& failure) const;
};

}  // namespace fairlane
