#include "provider/listen.hpp"

#include <fmt/format.h>

#include <iostream>

namespace fairlane {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

Result<tcp::acceptor> open_acceptor(asio::io_context& io, const std::string& address,
                                    std::uint16_t port) {
  boost::system::error_code error;
  const auto ip = asio::ip::make_address(address, error);
  if (error) {
    return Status(StatusCode::invalid_argument,
                  fmt::format("'{}' is not an IP address to listen on", address));
  }
  tcp::acceptor acceptor(io);
  const tcp::endpoint endpoint(ip, port);
  acceptor.open(endpoint.protocol(), error);
  if (!error) acceptor.set_option(asio::socket_base::reuse_address(true), error);
  if (!error) acceptor.bind(endpoint, error);
  if (!error) acceptor.listen(asio::socket_base::max_listen_connections, error);
  if (error) {
    return Status(StatusCode::io_error,
                  fmt::format("cannot listen on {}:{}: {} (is another program using the port?)",
                              address, port, error.message()));
  }
  return acceptor;
}

void ReportFailure::operator()(const std::exception_ptr& failure) const {
  if (!failure) return;
  try {
    std::rethrow_exception(failure);
  } catch (const std::exception& e) {
    std::cerr << label << ": " << e.what() << '\n';
  }
}

}  // namespace fairlane
